package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/logbook-agents/logbook/internal/rollout"
)

// UsersVersion is the version of the users file this code reads and writes.
const UsersVersion = 1

// Users is the users file of `coordinator serve --auth FILE`: who may
// connect to the embedded server, each with a role. Permissions are not in
// the file: they follow from the role (and an agent's scope), so they stay
// in step with the subjects this version of Logbook uses.
type Users struct {
	Version int    `json:"version"`
	Users   []User `json:"users"`
}

// User is one entry: an nkey (public key, the seed stays with the user) or
// a bcrypt password hash.
type User struct {
	Name     string `json:"name"`
	Role     Role   `json:"role"`
	NKey     string `json:"nkey,omitempty"`     // U..., public user nkey
	Password string `json:"password,omitempty"` // bcrypt hash ($2a$...), never the password
	Scope           // agents only
}

// ErrBadUsers is wrapped by every problem found in a users file.
var ErrBadUsers = errors.New("auth: bad users file")

// LoadUsers reads and checks a users file. A missing file is an error: an
// --auth that names nothing must not start a server anyone can use.
func LoadUsers(path string) (*Users, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: --auth: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var u Users
	if err := dec.Decode(&u); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadUsers, path, err)
	}
	if err := u.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &u, nil
}

// Check validates every entry: a known version and role, a unique valid
// name, exactly one of a valid public user nkey or a bcrypt hash, a scope
// only on an agent.
func (u *Users) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadUsers}, a...)...)
	}
	if u.Version != UsersVersion {
		return bad("version %d, this coordinator reads version %d", u.Version, UsersVersion)
	}
	seen := map[string]bool{}
	keys := map[string]bool{}
	for i, e := range u.Users {
		where := fmt.Sprintf("user %d (%q)", i+1, e.Name)
		if err := rollout.ValidateID("user name", e.Name); err != nil {
			return bad("%s: %v", where, err)
		}
		if seen[e.Name] {
			return bad("%s: the name is used twice", where)
		}
		seen[e.Name] = true
		if _, err := ParseRole(string(e.Role)); err != nil {
			return bad("%s: %v", where, err)
		}
		switch {
		case (e.NKey == "") == (e.Password == ""):
			return bad("%s: give exactly one of nkey and password", where)
		case e.NKey != "" && !nkeys.IsValidPublicUserKey(e.NKey):
			return bad("%s: nkey %q is not a public user nkey (U...)", where, e.NKey)
		case e.NKey != "" && keys[e.NKey]:
			return bad("%s: nkey used twice", where)
		case e.Password != "" && !isBcrypt(e.Password):
			return bad("%s: password is not a bcrypt hash ($2a$...): the file holds hashes, never passwords (coordinator credentials new writes one)", where)
		}
		keys[e.NKey] = true
		if e.Role != RoleAgent && !e.Scope.IsZero() {
			return bad("%s: threads, rollouts, workers, publish and subscribe scope agents only", where)
		}
		if err := e.Scope.Check(); err != nil {
			return bad("%s: %v", where, err)
		}
	}
	return nil
}

func isBcrypt(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

// Add appends a user after checking the result.
func (u *Users) Add(e User) error {
	n := &Users{Version: u.Version, Users: append(append([]User{}, u.Users...), e)}
	if n.Version == 0 {
		n.Version = UsersVersion
	}
	if err := n.Check(); err != nil {
		return err
	}
	*u = *n
	return nil
}

// Save writes the file by temp file, fsync and rename (mode 0600): a reader
// sees the old users or the new.
func (u *Users) Save(path string) error {
	b, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// ServerUsers turns the entries into nats-server users with their
// permissions (all in the server's global account).
func (u *Users) ServerUsers() ([]*server.User, []*server.NkeyUser) {
	var users []*server.User
	var nk []*server.NkeyUser
	for _, e := range u.Users {
		perms := Permissions(e.Role, e.Scope)
		if e.NKey != "" {
			nk = append(nk, &server.NkeyUser{Nkey: e.NKey, Permissions: perms})
		} else {
			users = append(users, &server.User{Username: e.Name, Password: e.Password, Permissions: perms})
		}
	}
	return users, nk
}

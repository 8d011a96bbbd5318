package auth

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ConfVar is the nats-server configuration variable holding a role's
// permissions in deploy/nats-cluster/permissions.conf.
func ConfVar(r Role) string { return "LOGBOOK_" + strings.ToUpper(string(r)) }

// PermissionsConf renders the three roles' permissions as nats-server
// configuration variables (deploy/nats-cluster/permissions.conf).
func PermissionsConf() string {
	var b strings.Builder
	b.WriteString("# Logbook roles as nats-server permissions. Generated from internal/stream/auth\n")
	b.WriteString("# (coordinator credentials new --format conf prints a user for them); the\n")
	b.WriteString("# tests fail when this file and the code disagree. See docs/SECURITY.md.\n")
	for _, r := range Roles {
		fmt.Fprintf(&b, "\n%s = %s\n", ConfVar(r), permsConf(Permissions(r, Scope{}), ""))
	}
	return b.String()
}

// UserConf renders one user as an entry of a nats-server users list: an
// unscoped role refers to its variable; a scoped agent has its permissions
// inline.
func UserConf(e User) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s (%s)\n{", e.Name, e.Role)
	if e.NKey != "" {
		fmt.Fprintf(&b, " nkey: %q,", e.NKey)
	} else {
		fmt.Fprintf(&b, " user: %q, password: %q,", e.Name, e.Password)
	}
	if e.Scope.IsZero() {
		fmt.Fprintf(&b, " permissions: $%s }\n", ConfVar(e.Role))
	} else {
		fmt.Fprintf(&b, " permissions: %s }\n", permsConf(Permissions(e.Role, e.Scope), "  "))
	}
	return b.String()
}

func permsConf(p *server.Permissions, indent string) string {
	var b strings.Builder
	b.WriteString("{\n")
	side := func(name string, sp *server.SubjectPermission) {
		if sp == nil {
			return
		}
		fmt.Fprintf(&b, "%s  %s: {\n", indent, name)
		list := func(key string, subs []string) {
			if len(subs) == 0 {
				return
			}
			fmt.Fprintf(&b, "%s    %s: [\n", indent, key)
			for _, s := range subs {
				fmt.Fprintf(&b, "%s      %q\n", indent, s)
			}
			fmt.Fprintf(&b, "%s    ]\n", indent)
		}
		list("allow", sp.Allow)
		list("deny", sp.Deny)
		fmt.Fprintf(&b, "%s  }\n", indent)
	}
	side("publish", p.Publish)
	side("subscribe", p.Subscribe)
	if p.Response != nil {
		fmt.Fprintf(&b, "%s  allow_responses: { max: %d, expires: %q }\n", indent, p.Response.MaxMsgs, p.Response.Expires.String())
	}
	fmt.Fprintf(&b, "%s}", indent)
	return b.String()
}

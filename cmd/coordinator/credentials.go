package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/logbook-agents/logbook/internal/stream/auth"
)

func newCredentialsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Make credentials for the bus (agents, operators, coordinators)",
		Long: `credentials makes users of the bus; docs/SECURITY.md says what each role
may do. Its one command is new.

Exit status: 0 on success, 1 when it fails, 2 for a usage error.`,
		Example: `  coordinator credentials new --role agent --name worker-0 --auth users.json`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCredentialsNewCmd())
	return cmd
}

type credFlags struct {
	role     string
	name     string
	out      string
	users    string
	password bool
	format   string
	scope    auth.Scope
}

func newCredentialsNewCmd() *cobra.Command {
	var fl credFlags
	cmd := &cobra.Command{
		Use:   "new --role agent|operator|coordinator",
		Short: "Make a user of the bus: its secret in --out, its entry in the users file",
		Long: `credentials new makes a user of the bus with a role (docs/SECURITY.md says
exactly what each role may do):

  coordinator  everything a coordinator runs (another coordinator on --nats)
  operator     read everything, run the writing commands (fork, revert, gc ...)
  agent        write rollouts, send mail, take leases, read its mailbox; no
               stream or consumer administration, no purge, no THREADS writes.
               --thread, --rollout and --worker narrow it further;
               --publish and --subscribe add application subjects (an
               agent's own request/reply to its tools), never Logbook's.

It makes an nkey pair (or, with --password, a random password), writes the
secret to --out (mode 0600; an existing file is never replaced), and adds the
user to the users file --auth names (created if missing) for
'coordinator serve --auth FILE'; restart serve to load it. Without --auth it
prints the entry instead: a users-file entry (--format json) or a nats-server
configuration entry for a cluster (--format conf, see deploy/nats-cluster).

The user then connects with --nkey FILE (or --user NAME --password ..., or
$LOGBOOK_NATS_PASSWORD), on any command, and agent.Options.NKeySeedFile.

Exit status: 0 when the secret is written (and the users file updated), 1
when it fails (the --out file exists, the users file is bad), 2 for a usage
error.`,
		Example: `  coordinator credentials new --role agent --name worker-1 --auth users.json
  coordinator credentials new --role agent --name w2 --thread t-42 --out w2.nk --format conf
  coordinator credentials new --role operator --name alice --password --auth users.json
  coordinator credentials new --role agent --name tools --publish 'sim.world.>' --auth users.json`,
		Args: checkedArgs(cobra.NoArgs, func() error {
			if _, err := auth.ParseRole(fl.role); err != nil {
				return fmt.Errorf("--role %q: want agent, operator or coordinator", fl.role)
			}
			if fl.format != "json" && fl.format != "conf" {
				return fmt.Errorf("--format %q: want json or conf", fl.format)
			}
			if fl.role != string(auth.RoleAgent) && !fl.scope.IsZero() {
				return errors.New("--thread, --rollout, --worker, --publish and --subscribe scope agents only")
			}
			return fl.scope.Check()
		}),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCredentialsNew(cmd.OutOrStdout(), fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.role, "role", "", "agent, operator or coordinator (required)")
	f.StringVar(&fl.name, "name", "", "user `NAME` (default <role>-<random>)")
	f.StringVar(&fl.out, "out", "", "`FILE` for the secret (default <name>.nk, or <name>.password)")
	f.StringVar(&fl.users, "auth", "", "add the user to this users `FILE` (serve --auth)")
	f.BoolVar(&fl.password, "password", false, "a random password instead of an nkey")
	f.StringVar(&fl.format, "format", "json", "without --auth, print the entry as json (users file) or conf (nats-server)")
	f.StringSliceVar(&fl.scope.Threads, "thread", nil, "agent: only this thread's lease and mailbox (repeatable)")
	f.StringSliceVar(&fl.scope.Rollouts, "rollout", nil, "agent: publish only on this rollout (repeatable)")
	f.StringSliceVar(&fl.scope.Workers, "worker", nil, "agent: heartbeat only as this worker `ID` (repeatable)")
	f.StringSliceVar(&fl.scope.Publish, "publish", nil, "agent: also publish on this application `SUBJECT` (its tools' traffic; repeatable; never Logbook's own)")
	f.StringSliceVar(&fl.scope.Subscribe, "subscribe", nil, "agent: also subscribe to this application `SUBJECT` (repeatable)")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func runCredentialsNew(w io.Writer, fl credFlags) error {
	role, _ := auth.ParseRole(fl.role)
	if fl.name == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		fl.name = fl.role + "-" + hex.EncodeToString(b)
	}
	entry := auth.User{Name: fl.name, Role: role, Scope: fl.scope}
	var secret []byte
	if fl.password {
		pw, hash, err := auth.NewPassword()
		if err != nil {
			return err
		}
		secret, entry.Password = []byte(pw), hash
	} else {
		seed, pub, err := auth.NewNKey()
		if err != nil {
			return err
		}
		secret, entry.NKey = seed, pub
	}
	// Check the users file can take the entry before writing anything.
	var users *auth.Users
	if fl.users != "" {
		var err error
		users, err = auth.LoadUsers(fl.users)
		if errors.Is(err, os.ErrNotExist) {
			users, err = &auth.Users{Version: auth.UsersVersion}, nil
		}
		if err != nil {
			return err
		}
		if err := users.Add(entry); err != nil {
			return fmt.Errorf("%s: %w", fl.users, err)
		}
	} else if err := (&auth.Users{Version: auth.UsersVersion, Users: []auth.User{entry}}).Check(); err != nil {
		return err
	}
	out := fl.out
	if out == "" {
		out = fl.name + ".nk"
		if fl.password {
			out = fl.name + ".password"
		}
	}
	if err := auth.WriteSecret(out, secret); err != nil {
		return err
	}
	connect := "--nkey " + out
	if fl.password {
		connect = fmt.Sprintf("--user %s with LOGBOOK_NATS_PASSWORD=$(cat %s)", fl.name, out)
	}
	if users != nil {
		if err := users.Save(fl.users); err != nil {
			os.Remove(out)
			return err
		}
		fmt.Fprintf(w, "user %s (%s): secret in %s (mode 0600), added to %s; restart coordinator serve --auth %s to load it\nconnect with: %s\n",
			fl.name, role, out, fl.users, fl.users, connect)
		return nil
	}
	fmt.Fprintf(w, "# user %s (%s): secret in %s (mode 0600); connect with: %s\n", fl.name, role, out, connect)
	if fl.format == "conf" {
		fmt.Fprint(w, auth.UserConf(entry))
		return nil
	}
	b, _ := json.MarshalIndent(entry, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
	return nil
}

package auth

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/logbook-agents/logbook/internal/rollout"
	"github.com/logbook-agents/logbook/internal/stream"
)

// Role is what a user of the bus may do (see the package doc).
type Role string

// The three roles.
const (
	RoleCoordinator Role = "coordinator"
	RoleOperator    Role = "operator"
	RoleAgent       Role = "agent"
)

// Roles lists the roles, most privileged first.
var Roles = []Role{RoleCoordinator, RoleOperator, RoleAgent}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(Roles, r) {
		return "", fmt.Errorf("auth: role %q: want coordinator, operator or agent", s)
	}
	return r, nil
}

// Scope narrows an agent's permissions to some threads and rollouts. Empty
// lists leave that part unscoped (any thread, any rollout).
type Scope struct {
	Threads  []string `json:"threads,omitempty"`  // leases and mailboxes it may use
	Rollouts []string `json:"rollouts,omitempty"` // rollout subjects it may publish on
}

// Check validates the IDs of a scope.
func (s Scope) Check() error {
	for _, id := range s.Threads {
		if err := rollout.ValidateID("thread id", id); err != nil {
			return fmt.Errorf("auth: scope: %w", err)
		}
	}
	for _, id := range s.Rollouts {
		if err := rollout.ValidateID("rollout id", id); err != nil {
			return fmt.Errorf("auth: scope: %w", err)
		}
	}
	return nil
}

// JetStream API subjects.
const (
	api    = "$JS.API."
	kv     = "$KV."
	inbox  = "_INBOX.>"
	jsAck  = "$JS.ACK."
	kvPfx  = "KV_"
	anyOne = "*"
)

// responseTTL is how long the coordinator may answer a request it got.
const responseTTL = time.Minute

// destructive is denied to every role: nothing Logbook runs deletes a
// stream, its messages one by one, or purges MAIL or a bucket.
var destructive = []string{
	api + "STREAM.DELETE.>",
	api + "STREAM.MSG.DELETE.>",
	api + "STREAM.PURGE." + stream.StreamMail,
	api + "STREAM.PURGE." + kvPfx + stream.BucketThreads,
	api + "STREAM.PURGE." + kvPfx + stream.BucketLeases,
}

// Permissions are the NATS permissions of a role; scope applies to agents
// only. They are exactly what the commands of that role use (the tests in
// this package run each role's work under them and try what it must not do).
func Permissions(r Role, scope Scope) *server.Permissions {
	switch r {
	case RoleCoordinator:
		return coordinatorPerms()
	case RoleOperator:
		return operatorPerms()
	}
	return agentPerms(scope)
}

// reads are the requests that read the bus: stream and bucket info, message
// gets through the stream leader, direct gets of keys.
func reads() []string {
	return []string{
		api + "INFO",
		api + "STREAM.INFO.*",
		api + "STREAM.NAMES",
		api + "STREAM.LIST",
		api + "STREAM.MSG.GET.*",
		api + "DIRECT.GET.>",
	}
}

// consumers are what ordered and pull consumers use to read: create (the
// consumer name is in the subject), fetch, ack, flow control, info, delete.
func consumers() []string {
	return []string{
		api + "CONSUMER.CREATE.>",
		api + "CONSUMER.INFO.>",
		api + "CONSUMER.MSG.NEXT.>",
		api + "CONSUMER.DELETE.>",
		jsAck + ">",
		"$JS.FC.>",
	}
}

func coordinatorPerms() *server.Permissions {
	pub := []string{
		api + "STREAM.CREATE.*", // Setup: missing streams and buckets
		rolloutAll(), mailAll(),
		kv + stream.BucketThreads + ".>", // roll-forward switches THREADS
		kv + stream.BucketLeases + ".>",
		stream.SubjectRecordThread,
	}
	pub = append(pub, reads()...)
	pub = append(pub, consumers()...)
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: destructive},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox, stream.SubjectRecordThread}},
		// It answers agents' thread-record requests on their inboxes.
		Response: &server.ResponsePermission{MaxMsgs: 1, Expires: responseTTL},
	}
}

func operatorPerms() *server.Permissions {
	pub := []string{
		rolloutAll(), mailAll(),
		kv + stream.BucketThreads + ".>", // fork, revert, import
		kv + stream.BucketLeases + ".>",
		api + "STREAM.PURGE." + stream.StreamRollouts, // gc removes a rollout's subject
		stream.SubjectRecordThread,
	}
	pub = append(pub, reads()...)
	pub = append(pub, consumers()...)
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: destructive},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox}},
	}
}

func agentPerms(s Scope) *server.Permissions {
	threads := s.Threads
	if len(threads) == 0 {
		threads = []string{anyOne}
	}
	pub := []string{mailAll(), stream.SubjectRecordThread}
	if len(s.Rollouts) == 0 {
		pub = append(pub, rolloutAll())
	}
	for _, r := range s.Rollouts {
		pub = append(pub, stream.RolloutSubject(r))
	}
	for _, t := range threads {
		cons := stream.MailConsumerName(t)
		if t == anyOne {
			cons = anyOne
		}
		pub = append(pub,
			kv+stream.BucketLeases+"."+t,
			api+"CONSUMER.CREATE."+stream.StreamMail+"."+cons+"."+stream.MailSubject(t),
			api+"CONSUMER.MSG.NEXT."+stream.StreamMail+"."+cons,
			jsAck+stream.StreamMail+"."+cons+".>",
		)
	}
	pub = append(pub,
		api+"INFO",
		api+"STREAM.INFO."+stream.StreamRollouts,
		api+"STREAM.INFO."+stream.StreamMail,
		api+"STREAM.INFO."+kvPfx+stream.BucketThreads,
		api+"STREAM.INFO."+kvPfx+stream.BucketLeases,
		api+"STREAM.MSG.GET."+stream.StreamRollouts,
		api+"STREAM.MSG.GET."+stream.StreamMail,
		api+"STREAM.MSG.GET."+kvPfx+stream.BucketThreads,
		api+"STREAM.MSG.GET."+kvPfx+stream.BucketLeases,
		api+"DIRECT.GET."+kvPfx+stream.BucketThreads+".>",
		api+"DIRECT.GET."+kvPfx+stream.BucketLeases+".>",
	)
	deny := append(slices.Clone(destructive),
		api+"STREAM.PURGE.>",
		api+"STREAM.CREATE.>",
		api+"STREAM.UPDATE.>",
		api+"CONSUMER.DELETE.>",
		kv+stream.BucketThreads+".>",
	)
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox}},
	}
}

func rolloutAll() string { return stream.RolloutSubject(">") }
func mailAll() string    { return stream.MailSubject(">") }

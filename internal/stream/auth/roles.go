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

// Scope narrows an agent's permissions to some threads, rollouts and
// worker ids, and adds the application subjects of its own tools' traffic.
// Empty lists leave that part unscoped (any thread, any rollout, any worker)
// or add nothing (Publish, Subscribe).
type Scope struct {
	Threads  []string `json:"threads,omitempty"`  // leases and mailboxes it may use
	Rollouts []string `json:"rollouts,omitempty"` // rollout subjects it may publish on
	Workers  []string `json:"workers,omitempty"`  // worker ids it may heartbeat as
	// Application subjects it may also publish on and subscribe to (its own
	// request/reply to its tools, say); none may touch Logbook's subjects.
	Publish   []string `json:"publish,omitempty"`
	Subscribe []string `json:"subscribe,omitempty"`
}

// IsZero reports an empty scope.
func (s Scope) IsZero() bool {
	return len(s.Threads)+len(s.Rollouts)+len(s.Workers)+len(s.Publish)+len(s.Subscribe) == 0
}

// Reserved are the subject spaces of Logbook and of NATS itself: no
// application subject may match a subject in them.
var Reserved = []string{
	rolloutAll(), mailAll(), stream.WorkSubject(">"), "logbook.>", inbox,
	"$JS.>", kv + ">", "$JSC.>", "$O.>", "$SYS.>", "$NRG.>",
}

// Check validates the IDs and application subjects of a scope.
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
	for _, id := range s.Workers {
		if err := rollout.ValidateID("worker id", id); err != nil {
			return fmt.Errorf("auth: scope: %w", err)
		}
	}
	for _, subj := range slices.Concat(s.Publish, s.Subscribe) {
		if err := checkAppSubject(subj); err != nil {
			return fmt.Errorf("auth: scope: %w", err)
		}
	}
	return nil
}

// checkAppSubject refuses an invalid subject and one that could match a
// reserved subject (wildcards included: "*.x" matches "mail.x").
func checkAppSubject(subj string) error {
	if !server.IsValidSubject(subj) {
		return fmt.Errorf("application subject %q is not a valid NATS subject", subj)
	}
	for _, r := range Reserved {
		if server.SubjectsCollide(subj, r) {
			return fmt.Errorf("application subject %q overlaps %s, which only Logbook's own permissions grant", subj, r)
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
		stream.WorkSubject(">"),          // the supervisor offers threads to workers
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
	workers := s.Workers
	if len(workers) == 0 {
		workers = []string{anyOne}
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
			api+"CONSUMER.DELETE."+stream.StreamMail+"."+cons, // Close removes its mailbox
			jsAck+stream.StreamMail+"."+cons+".>",
		)
	}
	for _, w := range workers {
		pub = append(pub, kv+stream.BucketWorkers+"."+w) // its heartbeat
	}
	work := stream.StreamWork + "." + stream.WorkConsumer
	pub = append(pub,
		// Offers: bind to the workers' consumer (the coordinator creates it),
		// fetch, ack, nak.
		api+"CONSUMER.INFO."+work,
		api+"CONSUMER.MSG.NEXT."+work,
		jsAck+work+".>",
		api+"INFO",
		api+"STREAM.INFO."+stream.StreamRollouts,
		api+"STREAM.INFO."+stream.StreamMail,
		api+"STREAM.INFO."+stream.StreamWork,
		api+"STREAM.INFO."+kvPfx+stream.BucketThreads,
		api+"STREAM.INFO."+kvPfx+stream.BucketLeases,
		api+"STREAM.INFO."+kvPfx+stream.BucketWorkers,
		api+"STREAM.MSG.GET."+stream.StreamRollouts,
		api+"STREAM.MSG.GET."+stream.StreamMail,
		api+"STREAM.MSG.GET."+kvPfx+stream.BucketThreads,
		api+"STREAM.MSG.GET."+kvPfx+stream.BucketLeases,
		api+"DIRECT.GET."+kvPfx+stream.BucketThreads+".>",
		api+"DIRECT.GET."+kvPfx+stream.BucketLeases+".>",
		// A worker reads the heartbeat an earlier process under its id left.
		api+"STREAM.MSG.GET."+kvPfx+stream.BucketWorkers,
		api+"DIRECT.GET."+kvPfx+stream.BucketWorkers+".>",
	)
	pub = append(pub, s.Publish...)
	deny := append(slices.Clone(destructive),
		api+"STREAM.PURGE.>",
		api+"STREAM.CREATE.>",
		api+"STREAM.UPDATE.>",
		api+"CONSUMER.CREATE."+stream.StreamWork+".>", // no changing how offers are handed out
		api+"CONSUMER.DELETE."+stream.StreamWork+".>",
		api+"CONSUMER.DELETE."+stream.StreamRollouts+".>",
		api+"CONSUMER.DELETE."+kvPfx+stream.BucketThreads+".>",
		api+"CONSUMER.DELETE."+kvPfx+stream.BucketLeases+".>",
		api+"CONSUMER.DELETE."+kvPfx+stream.BucketWorkers+".>",
		kv+stream.BucketThreads+".>",
	)
	p := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: append([]string{inbox}, s.Subscribe...)},
	}
	if len(s.Subscribe) > 0 {
		// A service on its application subjects answers the requests it got.
		p.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: responseTTL}
	}
	return p
}

func rolloutAll() string { return stream.RolloutSubject(">") }
func mailAll() string    { return stream.MailSubject(">") }

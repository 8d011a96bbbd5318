package auth_test

import (
	"strings"
	"testing"

	"github.com/logbook-agents/logbook/internal/stream/auth"
)

// An application subject that could match one of Logbook's or NATS's own
// subjects (wildcards included) is refused, naming the subject; disjoint
// ones pass.
func TestAppSubjectsMayNotTouchLogbook(t *testing.T) {
	for _, subj := range []string{">", "*.x", "mail.t1", "rollout.>", "*.*", "$JS.API.STREAM.PURGE.ROLLOUTS", "_INBOX.abc", "logbook.api.threads.record", "work.*", "a..b", ""} {
		for _, s := range []auth.Scope{{Publish: []string{subj}}, {Subscribe: []string{subj}}} {
			err := s.Check()
			if err == nil {
				t.Errorf("scope %+v: accepted", s)
				continue
			}
			if !strings.Contains(err.Error(), "application subject") {
				t.Errorf("scope %+v: %v, want it to name the application subject", s, err)
			}
		}
	}
	for _, subj := range []string{"tools.>", "sim.world.exec", "acme.*.deploy", "x"} {
		if err := (auth.Scope{Publish: []string{subj}, Subscribe: []string{subj}}).Check(); err != nil {
			t.Errorf("%q: %v", subj, err)
		}
	}
	if err := (auth.Scope{Workers: []string{"bad id!"}}).Check(); err == nil {
		t.Error("an invalid worker id was accepted")
	}
}

package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/logbook-agents/logbook/internal/stream/streamtest"
)

// TestHealthDegraded: /healthz says "degraded" with the reason while the
// mirror reports one, and "ok" once it does not.
func TestHealthDegraded(t *testing.T) {
	b := streamtest.New(t, streamtest.Options{})
	full := "mirror: rollout r1: append: write /d/rollouts/r1.jsonl: no space left on device"
	var why atomic.Value
	why.Store(full)
	srv := httptest.NewServer(health(b.Conn, "nats://x", func() string { return why.Load().(string) }))
	defer srv.Close()
	get := func() (int, map[string]string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	if code, body := get(); code != 200 || body["status"] != "degraded" || body["reason"] != full {
		t.Fatalf("healthz: %d %v", code, body)
	}
	why.Store("")
	if code, body := get(); code != 200 || body["status"] != "ok" || body["reason"] != "" {
		t.Fatalf("healthz: %d %v", code, body)
	}
}

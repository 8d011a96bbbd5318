package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRoundTripBytes: every line of every golden file and of the six Codex
// rollouts decodes and re-encodes to identical bytes; a copy rebuilt from
// its fields decodes to the same fields. Lines that do not decode are
// exactly the damaged ones.
func TestRoundTripBytes(t *testing.T) {
	broken := map[string]int{"torn-unterminated.jsonl": 1, "torn-unparsable.jsonl": 1, "corrupt-middle.jsonl": 1}
	paths := codexFiles(t)
	for _, p := range goldenPaths(t) {
		paths = append(paths, p)
	}
	lines := 0
	for _, path := range paths {
		bad := 0
		for i, line := range splitLines(readFile(t, path)) {
			r, err := DecodeLine(line)
			if err != nil {
				bad++
				continue
			}
			lines++
			if got := r.Append(nil); !bytes.Equal(got, line) {
				t.Fatalf("%s line %d: Append changed the line", path, i+1)
			}
			if got := r.Encode(); !bytes.Equal(got[:len(got)-1], line) || got[len(got)-1] != '\n' {
				t.Fatalf("%s line %d: Encode is not the line and a newline", path, i+1)
			}
			c := r.Clone()
			c.Raw = nil
			r2, err := DecodeLine(c.Append(nil))
			if err != nil {
				t.Fatalf("%s line %d: rebuilt line does not decode: %v", path, i+1, err)
			}
			if msg := sameFields(&r, &r2); msg != "" {
				t.Fatalf("%s line %d: %s", path, i+1, msg)
			}
		}
		if want := broken[filepath.Base(path)]; bad != want {
			t.Errorf("%s: %d lines do not decode, want %d", path, bad, want)
		}
	}
	if lines < 4760 {
		t.Errorf("only %d lines checked", lines)
	}
}

// TestUnknownSurvives: unknown types, kinds and fields are kept, in order,
// byte for byte, and the known envelope fields around them are read.
func TestUnknownSurvives(t *testing.T) {
	lines := unknownShapes()
	tests := []struct {
		line    int
		typ     string
		kind    string
		extra   []string // key:value as written
		payload string   // a substring of the payload that must survive
	}{
		{1, TypeSessionMeta, "", nil, `"x_hint":{"a":[1,2,3]}`},
		{2, "checkpoint_hint", "", []string{`"trace_id":"t-1"`}, `"<fast> & cheap"`},
		{3, TypeEventMsg, EventTaskStarted, []string{`"x_shard":7`}, `"x_started_by":"cron"`},
		{4, TypeEventMsg, "future_kind", nil, `[true,false,null]`},
		{5, TypeResponseItem, ItemMessage, []string{`"span":{"id":"s-9"}`, `"x_after":"\u00e9"`}, `"x_phase":"final"`},
		{6, TypeResponseItem, "image_generation_call", nil, `"iVBORw0KGgo="`},
	}
	for _, tt := range tests {
		r, err := DecodeLine([]byte(lines[tt.line-1]))
		if err != nil {
			t.Fatalf("line %d: %v", tt.line, err)
		}
		if r.Type != tt.typ || r.EventKind() != tt.kind || r.Ordinal != int64(tt.line) || !r.CRCOK() {
			t.Errorf("line %d: type %q kind %q ordinal %d crc ok %v", tt.line, r.Type, r.EventKind(), r.Ordinal, r.CRCOK())
		}
		var extra []string
		for _, f := range r.Extra {
			extra = append(extra, string(f.Key)+":"+string(f.Value))
		}
		if fmt.Sprint(extra) != fmt.Sprint(tt.extra) {
			t.Errorf("line %d: extra %v, want %v", tt.line, extra, tt.extra)
		}
		if !bytes.Contains(r.Payload, []byte(tt.payload)) {
			t.Errorf("line %d: payload lost %s", tt.line, tt.payload)
		}
		if KnownType(r.Type) != (tt.typ != "checkpoint_hint") {
			t.Errorf("line %d: KnownType(%q) = %v", tt.line, r.Type, KnownType(r.Type))
		}
		if !Persist(&r) {
			t.Errorf("line %d: Persist drops an unknown shape", tt.line)
		}
	}
}

// TestReenvelope: a Codex line gets an ordinal and a crc; its payload and
// unknown envelope fields stay byte for byte.
func TestReenvelope(t *testing.T) {
	inputs := append([]string{}, codexShapes...)
	inputs = append(inputs, unknownShapes()...)
	for i, l := range splitLines(readFile(t, smallCodex(t))) {
		if i < 8 {
			inputs = append(inputs, string(l))
		}
	}
	for i, in := range inputs {
		r, err := DecodeLine([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		ord := int64(100 + i)
		c := r.Reenvelope(ord)
		line := c.Append(nil)
		got, err := DecodeLine(line)
		if err != nil {
			t.Fatalf("input %d: re-enveloped line does not decode: %v\n%s", i, err, line)
		}
		if got.Ordinal != ord || got.CRC != Checksum(r.Payload) || !got.CRCOK() || got.Timestamp != r.Timestamp || got.Type != r.Type {
			t.Errorf("input %d: ordinal %d crc %s timestamp %s type %s", i, got.Ordinal, got.CRC, got.Timestamp, got.Type)
		}
		if !bytes.Equal(got.Payload, r.Payload) {
			t.Errorf("input %d: payload re-encoded", i)
		}
		if msg := sameFields(&Record{Extra: r.Extra}, &Record{Extra: got.Extra}); msg != "" {
			t.Errorf("input %d: %s", i, msg)
		}
		if !bytes.Equal(r.Append(nil), []byte(in)) {
			t.Errorf("input %d: Reenvelope changed the original", i)
		}
	}
}

func TestDecodeLineRefuses(t *testing.T) {
	const p = `"payload":{"type":"x"}`
	tests := []struct{ name, line string }{
		{"empty", ``},
		{"not an object", `[1,2]`},
		{"truncated", `{"timestamp":"t","type":"event_msg",` + p[:12]},
		{"data after the object", `{"type":"event_msg",` + p + `} {}`},
		{"no type", `{"timestamp":"t",` + p + `}`},
		{"empty type", `{"type":"",` + p + `}`},
		{"type not a string", `{"type":7,` + p + `}`},
		{"no payload", `{"type":"event_msg"}`},
		{"known type, payload not an object", `{"type":"event_msg","payload":[1]}`},
		{"timestamp not a string", `{"timestamp":12,"type":"event_msg",` + p + `}`},
		{"ordinal 0", `{"ordinal":0,"type":"event_msg",` + p + `}`},
		{"negative ordinal", `{"ordinal":-3,"type":"event_msg",` + p + `}`},
		{"fractional ordinal", `{"ordinal":1.5,"type":"event_msg",` + p + `}`},
		{"exponent ordinal", `{"ordinal":1e3,"type":"event_msg",` + p + `}`},
		{"ordinal above 2^53", `{"ordinal":9007199254740993,"type":"event_msg",` + p + `}`},
		{"ordinal as a string", `{"ordinal":"1","type":"event_msg",` + p + `}`},
		{"short crc", `{"type":"event_msg",` + p + `,"crc":"abc"}`},
		{"crc not hex", `{"type":"event_msg",` + p + `,"crc":"abcdefgh"}`},
		{"duplicate type", `{"type":"event_msg","type":"x",` + p + `}`},
		{"duplicate payload through an escape", `{"type":"event_msg",` + p + `,"p\u0061yload":{}}`},
		{"duplicate payload key", `{"type":"event_msg","payload":{"type":"user_message","msg_id":"a.b","msg_id":"okid"}}`},
		{"duplicate payload key through an escape", `{"type":"event_msg","payload":{"msg_id":"a.b","msg\u005fid":"okid"}}`},
		{"duplicate payload key after many", `{"type":"x","payload":{` + manyKeys(40) + `,"k7":1}}`},
		{"invalid escape", `{"type":"event_msg",` + p + `,"x":"\q"}`},
		{"control character", "{\"type\":\"event_msg\"," + p + ",\"x\":\"a\tb\"}"},
		{"invalid UTF-8", "{\"type\":\"event_msg\"," + p + ",\"x\":\"\xff\"}"},
		{"leading zero", `{"type":"event_msg",` + p + `,"x":01}`},
		{"trailing comma", `{"type":"event_msg",` + p + `,}`},
		{"bad literal", `{"type":"event_msg",` + p + `,"x":tru}`},
		{"too deep", `{"type":"event_msg",` + p + `,"x":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
	}
	for _, tt := range tests {
		if r, err := DecodeLine([]byte(tt.line)); !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: DecodeLine(%.60q) = %+v, %v; want ErrSyntax", tt.name, tt.line, r, err)
		}
	}
}

func TestDecodeLineAccepts(t *testing.T) {
	tests := []struct {
		name, line string
		want       Record
	}{
		{"whitespace around members", ` { "type" : "x" , "payload" : 1 } `, Record{Type: "x", Payload: []byte(`1`)}},
		{"escaped key and value", `{"\u0074ype":"a\u00e9","payload":null}`, Record{Type: "aé", Payload: []byte(`null`)}},
		{"unknown type, any payload", `{"type":"later","payload":"s"}`, Record{Type: "later", Payload: []byte(`"s"`)}},
		{"uppercase crc", `{"type":"x","payload":{},"crc":"ABCDEF01"}`, Record{Type: "x", Payload: []byte(`{}`), CRC: "ABCDEF01"}},
		{"ordinal 2^53", `{"ordinal":9007199254740992,"type":"x","payload":{}}`, Record{Ordinal: 1 << 53, Type: "x", Payload: []byte(`{}`)}},
	}
	for _, tt := range tests {
		r, err := DecodeLine([]byte(tt.line))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if msg := sameFields(&tt.want, &r); msg != "" {
			t.Errorf("%s: %s", tt.name, msg)
		}
	}
}

func TestChecksum(t *testing.T) {
	// CRC-32C check value of "123456789" is e3069283 (RFC 3720 B.4).
	if got := Checksum([]byte("123456789")); got != "e3069283" {
		t.Errorf("Checksum = %s", got)
	}
	if got := Checksum(nil); got != "00000000" {
		t.Errorf("Checksum(nil) = %s", got)
	}
	r := New(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600)), 3, TypeEventMsg, []byte(`{"type":"task_started"}`))
	if r.Timestamp != "2026-01-02T02:04:05.006Z" || !r.CRCOK() {
		t.Errorf("New: %+v", r)
	}
	for _, crc := range []string{strings.ToUpper(r.CRC), r.CRC} {
		r.CRC = crc
		if !r.CRCOK() {
			t.Errorf("crc %s refused", crc)
		}
	}
	for _, crc := range []string{"00000000", "abc", "zzzzzzzz"} {
		r.CRC = crc
		if r.CRCOK() {
			t.Errorf("crc %s accepted", crc)
		}
	}
	r.CRC = ""
	if !r.CRCOK() {
		t.Error("an absent crc is refused")
	}
}

// TestBuiltEncoding: a record built in code is written in canonical member
// order, with its strings escaped as encoding/json does but <, > and & kept.
func TestBuiltEncoding(t *testing.T) {
	r := Record{Timestamp: "t\"<&>\n\x01é\xff", Ordinal: 9, Type: "x", Payload: []byte(`{}`), CRC: Checksum([]byte(`{}`)),
		Extra: []Field{{Key: []byte(`"k"`), Value: []byte(`[1]`)}}}
	want := `{"timestamp":"t\"<&>\n\u0001é\ufffd","ordinal":9,"type":"x","payload":{},"k":[1],"crc":"` + r.CRC + `"}`
	if got := string(r.Append(nil)); got != want {
		t.Errorf("Append:\n got %s\nwant %s", got, want)
	}
	if _, err := DecodeLine(r.Append(nil)); err != nil {
		t.Error(err)
	}
	v0 := Record{Timestamp: "t", Type: "x", Payload: []byte(`{}`)}
	if got := string(v0.Append(nil)); got != `{"timestamp":"t","type":"x","payload":{}}` {
		t.Errorf("version-0 record: %s", got)
	}
}

// TestClone: a clone shares no memory with the buffer it was decoded from.
func TestClone(t *testing.T) {
	buf := []byte(unknownShapes()[4])
	r, err := DecodeLine(buf)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Clone()
	want := string(buf)
	for i := range buf {
		buf[i] = 'x'
	}
	if string(c.Append(nil)) != want || string(c.Extra[0].Key) != `"span"` || !bytes.HasPrefix(c.Payload, []byte(`{"type":"message"`)) {
		t.Errorf("clone follows its source: %s", c.Append(nil))
	}
	built := Record{Type: "x", Payload: []byte(`{}`), Extra: []Field{{Key: []byte(`"k"`), Value: []byte(`1`)}}}
	bc := built.Clone()
	built.Payload[0], built.Extra[0].Value[0] = '[', '2'
	if string(bc.Payload) != `{}` || string(bc.Extra[0].Value) != `1` {
		t.Error("clone of a built record shares its slices")
	}
}

func TestLookup(t *testing.T) {
	obj := []byte(` {"a" : 1, "s":"x\"y", "o":{"type":"inner"}, "type":"outer", "arr":[1,{"b":2}], "n":-3}`)
	tests := []struct {
		key, want string
	}{
		{"a", `1`}, {"s", `"x\"y"`}, {"o", `{"type":"inner"}`}, {"type", `"outer"`}, {"arr", `[1,{"b":2}]`}, {"n", `-3`}, {"missing", ``},
	}
	for _, tt := range tests {
		if got := string(Lookup(obj, tt.key)); got != tt.want {
			t.Errorf("Lookup(%q) = %s, want %s", tt.key, got, tt.want)
		}
	}
	if s, ok := LookupString(obj, "s"); !ok || s != `x"y` {
		t.Errorf("LookupString = %q %v", s, ok)
	}
	if _, ok := LookupString(obj, "a"); ok {
		t.Error("LookupString of a number")
	}
	if n, ok := LookupInt(obj, "n"); !ok || n != -3 {
		t.Errorf("LookupInt = %d %v", n, ok)
	}
	if _, ok := LookupInt(obj, "missing"); ok {
		t.Error("LookupInt of a missing key")
	}
	for _, notObj := range []string{``, `[]`, `"s"`, `{`} {
		if v := Lookup([]byte(notObj), "a"); v != nil {
			t.Errorf("Lookup(%q) = %s", notObj, v)
		}
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	return b.String()
}

// A payload with a duplicate key is damage at its line, as in the envelope.
func TestPayloadDuplicateKeyLine(t *testing.T) {
	var b Builder
	good := b.Meta(SessionMeta{ID: "T", Cwd: "/"})
	bad := []byte(`{"ordinal":2,"type":"event_msg","payload":{"type":"user_message","msg_id":"a.b","msg_id":"okid"}}` + "\n")
	path := filepath.Join(t.TempDir(), "r.jsonl")
	if err := os.WriteFile(path, append(good.Encode(), bad...), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := log.Forward(0)
	if err != nil {
		t.Fatal(err)
	}
	var got *CorruptionError
	n := 0
	err = Scan(cur, func(ce *CorruptionError) error { got = ce; return nil }, func(Entry) (bool, error) { n++; return true, nil })
	if err != nil || n != 1 || got == nil || got.Line != 2 || !strings.Contains(got.Error(), "duplicate key") {
		t.Fatalf("records %d, damage %v, err %v", n, got, err)
	}
}

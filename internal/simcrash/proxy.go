package simcrash

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// Verdict is what a Rule says about one publish on its way to the server.
type Verdict int

const (
	// Forward passes the publish on.
	Forward Verdict = iota
	// DropAndCut kills the process just before it writes the publish:
	// neither it nor anything after it reaches the server.
	DropAndCut
)

// Frame is one publish (PUB or HPUB) a client sent.
type Frame struct {
	Subject, Reply string
	Header         []byte // the raw NATS/1.0 header block (HPUB), nil for PUB
	Payload        []byte
}

// HeaderValue returns one header's value ("" when absent).
func (f *Frame) HeaderValue(name string) string {
	for _, line := range bytes.Split(f.Header, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.TrimSpace(k)) == name {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

// Rule judges each publish of a proxied client, in the order the client
// wrote them.
type Rule func(*Frame) Verdict

// Acked is a publish the server acknowledged, with the acknowledgement
// forwarded to the client: what the client was told is stored.
type Acked struct {
	Frame
	Stream string
	Seq    uint64
}

// Proxy stands between one agent process and the nats-server: every byte
// the process sends and receives passes through it, parsed as the NATS
// client protocol. Cut models SIGKILL of the process: both directions stop
// at once, nothing the process had not yet handed to the proxy reaches the
// server, and its listener closes, so the client cannot reconnect. Acks the
// server sends for JetStream publishes are recorded (Acked) as they are
// forwarded: the ground truth of what the process was told is durable.
type Proxy struct {
	ln     net.Listener
	target string
	rule   Rule

	mu      sync.Mutex
	cut     bool
	conns   []net.Conn
	pending map[string]*Frame // reply subject -> publish awaiting its ack
	acked   []Acked
	written map[string]bool // subjects of the publishes forwarded
	cutDone chan struct{}
	onCut   func()
}

// NewProxy listens on 127.0.0.1 (the OS picks the port) and forwards to
// target (host:port). rule may be nil (forward everything); onCut, if not
// nil, is called once, first thing, when the proxy cuts.
func NewProxy(target string, rule Rule, onCut func()) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simcrash: proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, rule: rule, pending: map[string]*Frame{}, written: map[string]bool{}, cutDone: make(chan struct{}), onCut: onCut}
	go p.accept()
	return p, nil
}

// URL is the nats:// URL clients dial to go through the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut kills the proxied process's traffic (idempotent).
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		return
	}
	p.cut = true
	conns := p.conns
	p.conns = nil
	onCut := p.onCut
	p.mu.Unlock()
	if onCut != nil {
		onCut()
	}
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	close(p.cutDone)
}

// Close stops the proxy (a cut without the process dying: its own Close
// came first).
func (p *Proxy) Close() {
	p.mu.Lock()
	p.onCut = nil
	p.mu.Unlock()
	p.Cut()
}

// IsCut reports whether the proxy has cut.
func (p *Proxy) IsCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Acked returns the acknowledged publishes so far.
func (p *Proxy) Acked() []Acked {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Acked(nil), p.acked...)
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.upstream(c, s)
		go p.downstream(s, c)
	}
}

// Subjects returns the subjects the process published on (through the
// proxy: what reached the server or may have).
func (p *Proxy) Subjects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.written))
	for s := range p.written {
		out = append(out, s)
	}
	return out
}

// upstream copies client -> server, judging every publish.
func (p *Proxy) upstream(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(s, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			return
		}
		op, args := splitOp(line)
		var f *Frame
		var raw []byte
		switch op {
		case "PUB", "HPUB":
			f, raw, err = readPub(r, op, args, line)
			if err != nil {
				return
			}
		default:
			raw = line
		}
		if f != nil {
			v := Forward
			if p.rule != nil {
				v = p.rule(f)
			}
			if v == DropAndCut {
				p.Cut()
				return
			}
			p.mu.Lock()
			if f.Reply != "" {
				p.pending[f.Reply] = f
			}
			p.written[f.Subject] = true
			p.mu.Unlock()
		}
		if p.IsCut() {
			return
		}
		if _, err := w.Write(raw); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// downstream copies server -> client, recording JetStream acks.
func (p *Proxy) downstream(s, c net.Conn) {
	defer c.Close()
	defer s.Close()
	r := bufio.NewReaderSize(s, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	var told []Acked // acks in w, recorded once flushed to the client
	for {
		line, err := readLine(r)
		if err != nil {
			return
		}
		op, args := splitOp(line)
		raw := line
		if op == "MSG" || op == "HMSG" {
			subj, payload, full, err := readMsg(r, op, args, line)
			if err != nil {
				return
			}
			raw = full
			p.mu.Lock()
			pub := p.pending[subj]
			delete(p.pending, subj)
			p.mu.Unlock()
			if pub != nil {
				if stream, seq, ok := pubAck(payload); ok {
					told = append(told, Acked{Frame: *pub, Stream: stream, Seq: seq})
				}
			}
		}
		if p.IsCut() {
			return
		}
		if _, err := w.Write(raw); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
			if len(told) > 0 {
				p.mu.Lock()
				if !p.cut {
					p.acked = append(p.acked, told...)
				}
				p.mu.Unlock()
				told = told[:0]
			}
		}
	}
}

// readLine reads one protocol line with its "\r\n".
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) { // a long CONNECT or INFO
		buf := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.ReadSlice('\n')
			buf = append(buf, line...)
		}
		return buf, err
	}
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), line...), nil
}

// splitOp returns a line's operation (upper case) and its arguments.
func splitOp(line []byte) (string, [][]byte) {
	fields := bytes.Fields(line)
	if len(fields) == 0 {
		return "", nil
	}
	return string(bytes.ToUpper(fields[0])), fields[1:]
}

// readPub reads a PUB or HPUB's body: PUB subj [reply] size,
// HPUB subj [reply] hdrsize totalsize.
func readPub(r *bufio.Reader, op string, args [][]byte, line []byte) (*Frame, []byte, error) {
	sizes := 1
	if op == "HPUB" {
		sizes = 2
	}
	if len(args) < 1+sizes || len(args) > 2+sizes {
		return nil, nil, fmt.Errorf("simcrash: proxy: bad %s line %q", op, line)
	}
	f := &Frame{Subject: string(args[0])}
	if len(args) == 2+sizes {
		f.Reply = string(args[1])
	}
	total, err := strconv.Atoi(string(args[len(args)-1]))
	if err != nil || total < 0 {
		return nil, nil, fmt.Errorf("simcrash: proxy: bad %s size in %q", op, line)
	}
	hdr := 0
	if op == "HPUB" {
		if hdr, err = strconv.Atoi(string(args[len(args)-2])); err != nil || hdr < 0 || hdr > total {
			return nil, nil, fmt.Errorf("simcrash: proxy: bad HPUB header size in %q", line)
		}
	}
	body := make([]byte, total+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, nil, err
	}
	if op == "HPUB" {
		f.Header = body[:hdr]
	}
	f.Payload = body[hdr:total]
	return f, append(line, body...), nil
}

// readMsg reads a MSG or HMSG's body: MSG subj sid [reply] size,
// HMSG subj sid [reply] hdrsize totalsize. It returns the subject, the
// payload (headers cut off) and the whole frame.
func readMsg(r *bufio.Reader, op string, args [][]byte, line []byte) (string, []byte, []byte, error) {
	sizes := 1
	if op == "HMSG" {
		sizes = 2
	}
	if len(args) < 2+sizes || len(args) > 3+sizes {
		return "", nil, nil, fmt.Errorf("simcrash: proxy: bad %s line %q", op, line)
	}
	total, err := strconv.Atoi(string(args[len(args)-1]))
	if err != nil || total < 0 {
		return "", nil, nil, fmt.Errorf("simcrash: proxy: bad %s size in %q", op, line)
	}
	hdr := 0
	if op == "HMSG" {
		if hdr, err = strconv.Atoi(string(args[len(args)-2])); err != nil || hdr < 0 || hdr > total {
			return "", nil, nil, fmt.Errorf("simcrash: proxy: bad HMSG header size in %q", line)
		}
	}
	body := make([]byte, total+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", nil, nil, err
	}
	return string(args[0]), body[hdr:total], append(line, body...), nil
}

// pubAck decodes a JetStream publish acknowledgement ({"stream":..,"seq":..}
// without an error).
func pubAck(payload []byte) (string, uint64, bool) {
	if !bytes.HasPrefix(payload, []byte(`{"stream":`)) || bytes.Contains(payload, []byte(`"error"`)) {
		return "", 0, false
	}
	var a struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
	}
	if err := json.Unmarshal(payload, &a); err != nil || a.Seq == 0 {
		return "", 0, false
	}
	return a.Stream, a.Seq, true
}

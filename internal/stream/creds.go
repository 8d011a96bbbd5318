package stream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Credentials are how a client proves who it is to a NATS server and how it
// checks the server: the options the nats CLI takes. The zero value connects
// with no credentials and no TLS, which a coordinator serving on loopback
// without --auth accepts.
type Credentials struct {
	CredsFile string // a .creds file (user JWT and nkey seed), --creds
	NKeyFile  string // a file holding an nkey seed (SU...), --nkey
	User      string // --user, with Password
	Password  string // --password
	Token     string // --token

	TLSCA   string // PEM CA bundle the server's certificate must chain to, --tls-ca
	TLSCert string // PEM client certificate, --tls-cert (with TLSKey)
	TLSKey  string // PEM key of TLSCert, --tls-key
}

// Given reports whether any credential (not TLS) is set.
func (c Credentials) Given() bool {
	return c.CredsFile != "" || c.NKeyFile != "" || c.User != "" || c.Password != "" || c.Token != ""
}

// TLS reports whether any TLS option is set.
func (c Credentials) TLS() bool { return c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "" }

// Options turns the credentials into connection options for Dial: at most
// one kind of credential; any TLS option turns TLS on. Files are read now,
// so a missing or malformed one is an error naming its flag, not a refused
// connection later.
func (c Credentials) Options() ([]nats.Option, error) {
	var out []nats.Option
	kinds := 0
	if c.CredsFile != "" {
		kinds++
		if _, err := os.Stat(c.CredsFile); err != nil {
			return nil, fmt.Errorf("stream: --creds: %w", err)
		}
		out = append(out, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		kinds++
		opt, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("stream: --nkey %s: %w", c.NKeyFile, err)
		}
		out = append(out, opt)
	}
	if c.Token != "" {
		kinds++
		out = append(out, nats.Token(c.Token))
	}
	if c.User != "" || c.Password != "" {
		kinds++
		if c.User == "" {
			return nil, errors.New("stream: --password without --user")
		}
		out = append(out, nats.UserInfo(c.User, c.Password))
	}
	if kinds > 1 {
		return nil, errors.New("stream: give one kind of credentials: --creds, --nkey, --token, or --user with --password")
	}
	if c.TLS() {
		cfg, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		out = append(out, nats.Secure(cfg))
	}
	return out, nil
}

func (c Credentials) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("stream: --tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("stream: --tls-ca %s: no PEM certificate in it", c.TLSCA)
		}
		cfg.RootCAs = pool
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("stream: a TLS client certificate needs both --tls-cert and --tls-key")
	}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("stream: --tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

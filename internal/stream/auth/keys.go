package auth

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

// NewNKey makes a user nkey pair: the seed (SU..., the secret the client
// keeps, in the file --nkey reads) and its public key (U..., for the users
// file or the server configuration).
func NewNKey() (seed []byte, public string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", fmt.Errorf("auth: nkey: %w", err)
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, "", fmt.Errorf("auth: nkey: %w", err)
	}
	if public, err = kp.PublicKey(); err != nil {
		return nil, "", fmt.Errorf("auth: nkey: %w", err)
	}
	return seed, public, nil
}

// NewPassword makes a random password (32 bytes, base64url) and its bcrypt
// hash.
func NewPassword() (password, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	password = base64.RawURLEncoding.EncodeToString(b)
	h, err := bcrypt.GenerateFromPassword([]byte(password), 11)
	if err != nil {
		return "", "", fmt.Errorf("auth: bcrypt: %w", err)
	}
	return password, string(h), nil
}

// WriteSecret writes a secret (a seed, a password, a token) to path, mode
// 0600, refusing to replace an existing file.
func WriteSecret(path string, secret []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if _, err := f.Write(append(append([]byte{}, secret...), '\n')); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("auth: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("auth: %w", err)
	}
	return f.Close()
}

// ServerTLS is the TLS configuration of a server from PEM files: its
// certificate and key, and, when ca is given, mutual TLS (every client
// presents a certificate that chains to ca).
func ServerTLS(cert, key, ca string) (*server.TLSConfigOpts, error) {
	if cert == "" || key == "" {
		return nil, fmt.Errorf("auth: TLS needs both --tls-cert and --tls-key")
	}
	return &server.TLSConfigOpts{CertFile: cert, KeyFile: key, CaFile: ca, Verify: ca != "", Timeout: 2}, nil
}

// Package e2e holds tests that run the real binaries, kill them with
// SIGKILL, and check the system's invariants afterwards (DESIGN §2). It has
// no code of its own: everything is in its _test.go files.
//
// The mirror's crash campaign (mirror_crash_test.go) runs a short version
// in `go test ./...` (skipped with -short) and a long one with
// `make crash` (-crash.rounds, -crash.seed).
package e2e

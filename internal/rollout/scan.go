package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// A small validating JSON scanner. encoding/json cannot report the exact
// byte span, order and duplicates of an object's keys, and the envelope needs
// all three to survive a round trip byte for byte; it is also the hot path of
// every replay, so it never builds values it does not need.

const maxDepth = 512

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("byte %d: %s", e.off, e.msg) }

func errAt(off int, format string, args ...any) error {
	return &syntaxError{off: off, msg: fmt.Sprintf(format, args...)}
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue validates the JSON value starting at b[i] (no leading space) and
// returns the index just past it.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(i, "unexpected end of input")
	}
	switch c := b[i]; {
	case c == '{':
		return skipObject(b, i, depth+1)
	case c == '[':
		return skipArray(b, i, depth+1)
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	default:
		return i, errAt(i, "invalid character %q looking for a value", c)
	}
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, errAt(i, "invalid literal")
	}
	return i + len(lit), nil
}

func skipObject(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, errAt(i, "nested too deeply")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, errAt(i, "expected a string key")
		}
		end, _, err := scanString(b, i)
		if err != nil {
			return end, err
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return i, errAt(i, "expected ':' after a key")
		}
		i = skipWS(b, i+1)
		if i, err = skipValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, errAt(i, "unexpected end of object")
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, errAt(i, "expected ',' or '}' in an object")
		}
		i = skipWS(b, i+1)
	}
}

func skipArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, errAt(i, "nested too deeply")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skipValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, errAt(i, "unexpected end of array")
		}
		if b[i] == ']' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, errAt(i, "expected ',' or ']' in an array")
		}
		i = skipWS(b, i+1)
	}
}

// plain marks the bytes a string may hold without a second look: not '"',
// not '\\', not a control character. Bytes >= 0x80 are plain here; UTF-8 is
// validated once per line (DecodeLine), which is much faster than per rune.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString validates the string starting at b[i] == '"' (all but its UTF-8,
// see plain) and returns the index past its closing quote and whether it
// holds escapes.
func scanString(b []byte, i int) (int, bool, error) {
	start := i
	i++
	escaped := false
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return start, escaped, errAt(start, "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, errAt(i, "unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return i, escaped, errAt(i, "invalid \\u escape")
				}
				i += 6
			default:
				return i, escaped, errAt(i, "invalid escape %q", b[i+1])
			}
		default:
			return i, escaped, errAt(i, "control character in a string")
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return start, errAt(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return start, errAt(start, "invalid number")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return start, errAt(start, "invalid number")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, nil
}

// eachMember calls fn for every member of the object b (already validated or
// not: it validates as it goes) with the raw key (quotes included) and the
// exact bytes of its value.
func eachMember(b []byte, fn func(key, val []byte) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errAt(i, "expected a JSON object")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		if j := skipWS(b, i+1); j != len(b) {
			return errAt(j, "data after the object")
		}
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errAt(i, "expected a string key")
		}
		kend, _, err := scanString(b, i)
		if err != nil {
			return err
		}
		key := b[i:kend]
		i = skipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return errAt(i, "expected ':' after a key")
		}
		i = skipWS(b, i+1)
		vstart := i
		if i, err = skipValue(b, i, 1); err != nil {
			return err
		}
		if err := fn(key, b[vstart:i]); err != nil {
			return err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return errAt(i, "unexpected end of object")
		}
		if b[i] == '}' {
			if j := skipWS(b, i+1); j != len(b) {
				return errAt(j, "data after the object")
			}
			return nil
		}
		if b[i] != ',' {
			return errAt(i, "expected ',' or '}' in an object")
		}
		i = skipWS(b, i+1)
	}
}

// keyEquals reports whether the raw key (with quotes) names want.
func keyEquals(raw []byte, want string) bool {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == want
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	return s == want
}

// firstMember returns the index just inside the '{' of the JSON object obj,
// where nextMember starts, or -1 when obj is not an object.
func firstMember(obj []byte) int {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return -1
	}
	return i + 1
}

// nextMember reads the member of the valid JSON object obj at i (just inside
// '{' or past a ','): its raw key and value, and where the next member
// starts, or -1 after the last one. key is nil when there is no member at i.
// It skips values without validating them again (payloads are validated on
// decode).
func nextMember(obj []byte, i int) (key, val []byte, next int) {
	kstart := skipWS(obj, i)
	if kstart >= len(obj) || obj[kstart] != '"' {
		return nil, nil, -1
	}
	kend := skipStringFast(obj, kstart)
	if kend < 0 {
		return nil, nil, -1
	}
	i = skipWS(obj, kend)
	if i >= len(obj) || obj[i] != ':' {
		return nil, nil, -1
	}
	vstart := skipWS(obj, i+1)
	vend := skipValueFast(obj, vstart)
	if vend < 0 {
		return nil, nil, -1
	}
	key, val = obj[kstart:kend], obj[vstart:vend]
	i = skipWS(obj, vend)
	if i >= len(obj) || obj[i] != ',' {
		return key, val, -1
	}
	return key, val, i + 1
}

// Lookup returns the raw value of the top-level member key of the JSON object
// obj, or nil. obj must be valid JSON (payloads are validated on decode), so
// Lookup skips values without validating them again.
func Lookup(obj []byte, key string) []byte {
	for i := firstMember(obj); i >= 0; {
		var k, v []byte
		if k, v, i = nextMember(obj, i); k == nil {
			return nil
		}
		if keyEquals(k, key) {
			return v
		}
	}
	return nil
}

// duplicateKey returns the first top-level key of the valid JSON value obj
// that an earlier key already named (escapes decoded), or nil. Values that are
// not objects have no keys.
func duplicateKey(obj []byte) []byte {
	var keys []string
	var set map[string]bool
	for i := firstMember(obj); i >= 0; {
		var raw []byte
		if raw, _, i = nextMember(obj, i); raw == nil {
			return nil
		}
		k, ok := rawString(raw)
		if !ok {
			return nil
		}
		if set != nil {
			if set[k] {
				return raw
			}
			set[k] = true
			continue
		}
		for _, seen := range keys {
			if seen == k {
				return raw
			}
		}
		if keys = append(keys, k); len(keys) > 16 { // a set beyond a few keys: never quadratic
			set = make(map[string]bool, 2*len(keys))
			for _, seen := range keys {
				set[seen] = true
			}
		}
	}
	return nil
}

// skipStringFast returns the index past the string at b[i] == '"', or -1.
func skipStringFast(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		q := i + j
		n := 0 // backslashes before the quote
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// skipValueFast returns the index past the valid JSON value at b[i], or -1.
func skipValueFast(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipStringFast(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipStringFast(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return i
	}
}

// LookupString returns the top-level string member key of obj, and whether it
// was a string.
func LookupString(obj []byte, key string) (string, bool) {
	return rawString(Lookup(obj, key))
}

// LookupInt returns the top-level integer member key of obj.
func LookupInt(obj []byte, key string) (int64, bool) {
	v := Lookup(obj, key)
	if v == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// rawString decodes a raw JSON string value; ok is false for anything else.
func rawString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// appendQuoted appends s as a JSON string, escaping as encoding/json would
// but leaving <, > and & alone.
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// errStop ends an eachMember walk early.
var errStop = errors.New("stop")

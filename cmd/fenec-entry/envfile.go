package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// maxConfigFile bounds --config's file: far above any real one, and a wrong path (a log, a
// binary) fails fast instead of being read whole.
const maxConfigFile = 1 << 20

// envVar is one assignment of an environment file.
type envVar struct {
	value string
	line  int // where the assignment starts, from 1
}

// readEnvFile reads --config's file, in the format of systemd's EnvironmentFile=
// (systemd.exec(5)), so that one file serves the unit and the entry's reload:
//
//   - one NAME=value a line; empty lines and lines starting with # or ; are comments;
//   - leading and trailing blanks around the value are dropped, interior ones kept;
//   - an unquoted value takes \x as x (an escaped blank at its end is kept), and a \ at the
//     end of a line continues it, before LF or CRLF (systemd: LF only);
//   - '...' is taken verbatim and may span lines;
//   - "..." takes \" \\ \` \$ as the character, \ and a newline as a continuation, and any
//     other \x verbatim; it may span lines.
//
// A later assignment of a name wins, as in systemd. Unlike systemd, a line that is not a
// comment and has no "=" is an error rather than ignored: in a file that routes traffic, a
// typo should stop the reload, not vanish. Errors give the line number, never a value.
func readEnvFile(path string) (map[string]envVar, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("longer than %d bytes", maxConfigFile)
	}
	return parseEnvFile(data)
}

func parseEnvFile(data []byte) (map[string]envVar, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not UTF-8 text")
	}
	s := strings.TrimPrefix(string(data), "\uFEFF")
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errors.New("holds a NUL byte")
	}
	out := map[string]envVar{}
	line := 1
	for len(s) > 0 {
		start := line
		// One logical line: a name, "=", and a value that may continue on later lines.
		s = strings.TrimLeft(s, " \t\r")
		if s == "" {
			break
		}
		if s[0] == '\n' {
			s, line = s[1:], line+1
			continue
		}
		if s[0] == '#' || s[0] == ';' {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				break
			}
			s, line = s[i+1:], line+1
			continue
		}
		eq := strings.IndexByte(s, '=')
		nl := strings.IndexByte(s, '\n')
		if eq < 0 || (nl >= 0 && nl < eq) {
			return nil, fmt.Errorf("line %d: no \"=\" (want NAME=value, or # for a comment)", start)
		}
		name := strings.TrimRight(s[:eq], " \t\r")
		if !validEnvName(name) {
			// Not quoted: in a line like `KEY value==` (a missing "=", base64 padding),
			// the text before "=" is the value.
			return nil, fmt.Errorf("line %d: the text before \"=\" is not a variable name (letters, digits and _, not starting with a digit)", start)
		}
		var val string
		var err error
		val, s, line, err = envValue(s[eq+1:], line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %v", start, name, err)
		}
		out[name] = envVar{value: val, line: start}
	}
	return out, nil
}

func validEnvName(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// envValue reads one value from s (just after "="): it returns the value, the text after its
// line, and the line number that text starts on.
func envValue(s string, line int) (string, string, int, error) {
	s = strings.TrimLeft(s, " \t\r")
	var b strings.Builder
	switch {
	case strings.HasPrefix(s, "'"):
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", "", line, errors.New("a ' quote is not closed")
		}
		b.WriteString(s[1 : 1+end])
		line += strings.Count(s[1:1+end], "\n")
		s = s[end+2:]
	case strings.HasPrefix(s, `"`):
		i := 1
		for ; ; i++ {
			if i >= len(s) {
				return "", "", line, errors.New(`a " quote is not closed`)
			}
			c := s[i]
			if c == '"' {
				break
			}
			if c == '\n' {
				line++
			}
			if c != '\\' || i+1 >= len(s) {
				b.WriteByte(c)
				continue
			}
			switch n := s[i+1]; n {
			case '"', '\\', '`', '$':
				b.WriteByte(n)
				i++
			case '\n':
				line++
				i++
			default:
				b.WriteByte(c)
			}
		}
		s = s[i+1:]
	default:
		kept := 0 // the value up to its last escaped character: trailing blanks after it go
		for len(s) > 0 && s[0] != '\n' {
			c := s[0]
			switch {
			case c == '\\' && strings.HasPrefix(s, "\\\r\n"):
				// A continuation in a file saved with CRLF: systemd would end the value
				// here and read the next line as a new (likely unknown, ignored) name.
				line++
				s = s[3:]
				continue
			case c == '\\' && len(s) > 1:
				if s[1] == '\n' {
					line++
				} else {
					b.WriteByte(s[1])
					kept = b.Len()
				}
				s = s[2:]
				continue
			}
			if c != '\\' {
				b.WriteByte(c)
			}
			s = s[1:]
		}
		val := b.String()
		val = val[:kept] + strings.TrimRight(val[kept:], " \t\r")
		if len(s) > 0 {
			s, line = s[1:], line+1
		}
		return val, s, line, nil
	}
	// After a quoted value: blanks only, to the end of the line.
	rest := s
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		rest, s = s[:i], s[i+1:]
		line++
	} else {
		s = ""
	}
	if strings.TrimSpace(rest) != "" {
		return "", "", line, errors.New("text after the closing quote")
	}
	return b.String(), s, line, nil
}

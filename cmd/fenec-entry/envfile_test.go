package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// envSecret is planted in the values of the error rows: no error may show it.
const envSecret = "s3cr3t"

// envFileRow is one rule of parseEnvFile. A row with errLine set (or errHas without errLine,
// for an error about the whole file) wants an error; otherwise want is the whole result and
// lines, if set, the line of some of its assignments. Where systemd's EnvironmentFile= reads
// the row differently, the name says so.
type envFileRow struct {
	name    string
	in      string
	want    map[string]string
	lines   map[string]int
	errLine int    // the error starts "line N: "
	errHas  string // and says this
}

var envFileRows = []envFileRow{
	// Comments and blank lines.
	{name: "empty file", in: "", want: map[string]string{}},
	{name: "only blanks and newlines", in: " \t\n\n  \n", want: map[string]string{}},
	{name: "comments # and ; and blank lines", in: "# A=1\n; B=2\n\n   \n  \t# indented C=3\n\t; D=4\nE=5\n",
		want: map[string]string{"E": "5"}, lines: map[string]int{"E": 7}},
	{name: "comment ending in a backslash does not continue (as systemd since v254)", in: "# note \\\nA=1\n",
		want: map[string]string{"A": "1"}, lines: map[string]int{"A": 2}},
	{name: "comment at end of file without newline", in: "A=1\n# last", want: map[string]string{"A": "1"}},

	// NAME=value.
	{name: "NAME=value lines", in: "A=1\nB=two\n", want: map[string]string{"A": "1", "B": "two"},
		lines: map[string]int{"A": 1, "B": 2}},
	{name: "last line without newline", in: "A=1\nB=2", want: map[string]string{"A": "1", "B": "2"}},
	{name: "names of letters digits and underscores", in: "_a1=x\nFENEC_ENTRY_LISTEN=y\n",
		want: map[string]string{"_a1": "x", "FENEC_ENTRY_LISTEN": "y"}},
	{name: "blanks around name and value dropped", in: "  A \t=  \t v \t\n", want: map[string]string{"A": "v"}},
	{name: "interior blanks of a value kept", in: "A=a b \t c\n", want: map[string]string{"A": "a b \t c"}},
	{name: "trailing spaces dropped", in: "A=v   \nB='q'   \nC=\"r\" \t\n",
		want: map[string]string{"A": "v", "B": "q", "C": "r"}},
	{name: "empty value", in: "A=\nB=   \nC=''\nD=\"\"\nE=", want: map[string]string{"A": "", "B": "", "C": "", "D": "", "E": ""}},
	{name: "= inside a value", in: "A=b=c==\nB='=x'\n", want: map[string]string{"A": "b=c==", "B": "=x"}},
	{name: "# and ; inside an unquoted value are not comments", in: "A=x #y\nB=x;y\n",
		want: map[string]string{"A": "x #y", "B": "x;y"}},
	{name: "# and ; inside quoted values", in: "A='x # y'\nB=\"x ; y\"\n", want: map[string]string{"A": "x # y", "B": "x ; y"}},
	{name: "quotes inside an unquoted value kept", in: "A=it's \"x\"\n", want: map[string]string{"A": `it's "x"`}},
	{name: "later assignment wins", in: "A=1\nB=2\nA=3\n", want: map[string]string{"A": "3", "B": "2"},
		lines: map[string]int{"A": 3, "B": 2}},

	// Unquoted escapes and continuation.
	{name: "unquoted backslash takes the next character", in: `A=a\"b\\c\$d\xe\'f` + "\n",
		want: map[string]string{"A": `a"b\c$dxe'f`}},
	{name: "unquoted backslash-newline continues the value", in: "A=one\\\ntwo\nB=3\n",
		want: map[string]string{"A": "onetwo", "B": "3"}, lines: map[string]int{"A": 1, "B": 3}},
	{name: "continuation keeps the blanks on both sides", in: "A=a \\\n  b\n", want: map[string]string{"A": "a   b"}},
	{name: "escaped leading blank kept", in: "A=\\ v\n", want: map[string]string{"A": " v"}},
	{name: "escaped trailing blank kept", in: "A=v\\ \n", want: map[string]string{"A": "v "}},
	{name: "escaped trailing blank kept, plain ones after it dropped", in: "A=v\\  \t\n", want: map[string]string{"A": "v "}},
	{name: "lone backslash at end of file dropped", in: "A=v\\", want: map[string]string{"A": "v"}},
	{name: "backslash-newline at end of file", in: "A=v\\\n", want: map[string]string{"A": "v"}},

	// Single quotes.
	{name: "single quotes verbatim, a backslash does not escape the closing quote", in: `A='a\"b\\c$d "e" \'` + "\n",
		want: map[string]string{"A": `a\"b\\c$d "e" \`}},
	{name: "single quotes keep leading and trailing blanks", in: "A='  v  '\n", want: map[string]string{"A": "  v  "}},
	{name: "blanks before an opening quote dropped", in: "A=  'v'\n", want: map[string]string{"A": "v"}},
	{name: "single quotes span lines, the next line number right", in: "A='l1\nl2\n\nl4'\nB=x\n",
		want: map[string]string{"A": "l1\nl2\n\nl4", "B": "x"}, lines: map[string]int{"A": 1, "B": 5}},
	{name: "a # line inside multi-line quotes is value", in: "A='x\n# not a comment\n'\n",
		want: map[string]string{"A": "x\n# not a comment\n"}},

	// Double quotes.
	{name: "double quotes take \\\" \\\\ \\` \\$ as the character", in: `A="q\"b\\s\` + "`" + `t\$d"` + "\n",
		want: map[string]string{"A": "q\"b\\s`t$d"}},
	{name: "double quotes keep other backslashes", in: `A="\n\t\x\'"` + "\n", want: map[string]string{"A": `\n\t\x\'`}},
	{name: "double quotes backslash-newline continues", in: "A=\"one\\\ntwo\"\nB=1\n",
		want: map[string]string{"A": "onetwo", "B": "1"}, lines: map[string]int{"A": 1, "B": 3}},
	{name: "double quotes span lines, the next line number right", in: "A=\"l1\nl2\"\nB=1\n",
		want: map[string]string{"A": "l1\nl2", "B": "1"}, lines: map[string]int{"A": 1, "B": 3}},
	{name: "double quotes keep a single quote", in: `A="it's"` + "\n", want: map[string]string{"A": "it's"}},
	{name: "blanks after the closing quote allowed", in: "A='x' \t\nB=\"y\"  ", want: map[string]string{"A": "x", "B": "y"}},

	// Line endings and encodings.
	{name: "CRLF line endings", in: "A=1\r\nB='2'\r\n# c\r\n\r\n  \r\nC=\"3\"\r\nD=4",
		want: map[string]string{"A": "1", "B": "2", "C": "3", "D": "4"}, lines: map[string]int{"C": 6, "D": 7}},
	{name: "CRLF inside multi-line quotes kept", in: "A='x\r\ny'\r\n", want: map[string]string{"A": "x\r\ny"}},
	{name: "backslash before CRLF continues the value (systemd: it does not)", in: "A=x\\\r\ny\r\nB=z\r\n",
		want: map[string]string{"A": "xy", "B": "z"}, lines: map[string]int{"A": 1, "B": 3}},
	{name: "lone CR is not a line break (systemd: it is, A=x and a line y)", in: "A=x\ry\n",
		want: map[string]string{"A": "x\ry"}},
	{name: "BOM dropped (systemd keeps it in the first name, so that line is lost)", in: "\uFEFFA=1\n",
		want: map[string]string{"A": "1"}},
	{name: "UTF-8 values", in: "A=héllo wörld ✓\n", want: map[string]string{"A": "héllo wörld ✓"}},

	// Errors. systemd ignores most of these lines (or the rest of the file) without a word.
	{name: "line without = is an error (systemd ignores it)", in: "A=1\nFENEC_ENTRY_ENTRY_TOKEN " + envSecret + "\n",
		errLine: 2, errHas: `no "="`},
	{name: "line without = before a line with one", in: "A=1\n" + envSecret + "\nB=x\n", errLine: 2, errHas: `no "="`},
	{name: "a name alone at end of file", in: "A=1\n" + envSecret, errLine: 2, errHas: `no "="`},
	{name: "name starting with a digit (systemd ignores it)", in: "A=1\n1X=" + envSecret + "\n", errLine: 2, errHas: "not a variable name"},
	{name: "name with a dash", in: "A-B=" + envSecret + "\n", errLine: 1, errHas: "not a variable name"},
	{name: "name with a blank: export (systemd ignores it)", in: "\n\nexport A=" + envSecret + "\n", errLine: 3, errHas: "not a variable name"},
	{name: "empty name", in: "=" + envSecret + "\n", errLine: 1, errHas: "not a variable name"},
	{name: "secret before the = of base64 padding not echoed", in: "FENEC_ENTRY_GOSSIP_KEY " + envSecret + "AAAAAAAAAAAAAAA==\n",
		errLine: 1, errHas: "not a variable name"},
	{name: "secret before a colon not echoed", in: "FENEC_ENTRY_ENTRY_TOKEN: " + envSecret + "=\n", errLine: 1, errHas: "not a variable name"},
	{name: "a BOM not at the start is not dropped", in: "A=1\n\uFEFFB=" + envSecret + "\n", errLine: 2, errHas: "not a variable name"},
	{name: "unterminated single quote (systemd takes the rest of the file)", in: "A=1\nB='" + envSecret + "\nC=2\n",
		errLine: 2, errHas: "B: a ' quote is not closed"},
	{name: "unterminated double quote (systemd takes the rest of the file)", in: "B=\"" + envSecret + "\nC=2\n",
		errLine: 1, errHas: `B: a " quote is not closed`},
	{name: "double quote ending in a backslash at end of file", in: "B=\"" + envSecret + "\\", errLine: 1, errHas: `B: a " quote is not closed`},
	{name: "escaped closing quote leaves it open", in: `B="` + envSecret + `\"`, errLine: 1, errHas: `B: a " quote is not closed`},
	{name: "text after the closing single quote (systemd appends it)", in: "B='" + envSecret + "' x\n",
		errLine: 1, errHas: "B: text after the closing quote"},
	{name: "text after the closing double quote (systemd appends it)", in: `B="` + envSecret + `"x`, errLine: 1,
		errHas: "B: text after the closing quote"},
	{name: "second quoted part (systemd joins them)", in: "B='" + envSecret + "' 'more'\n", errLine: 1,
		errHas: "B: text after the closing quote"},
	{name: "comment after a closing quote (systemd keeps it in the value)", in: "B='" + envSecret + "' # note\n",
		errLine: 1, errHas: "B: text after the closing quote"},
	{name: "error line after a multi-line single quote", in: "A='x\ny\nz'\nB='" + envSecret + "\n",
		errLine: 4, errHas: "B: a ' quote is not closed"},
	{name: "error line after multi-line double quotes and continuations", in: "A=\"x\\\ny\nz\"\nC=a\\\nb\n# c\nB='" + envSecret + "' tail\n",
		errLine: 7, errHas: "B: text after the closing quote"},
	{name: "error line after a multi-line value on the line the value ends", in: "A='x\ny' " + envSecret + "\n",
		errLine: 1, errHas: "A: text after the closing quote"},
	{name: "error line after CRLF lines", in: "A=1\r\n\r\nB=\"" + envSecret + "\r\n", errLine: 3, errHas: `B: a " quote is not closed`},
	{name: "NUL byte (systemd stops reading at it)", in: "A=" + envSecret + "\x00rest\n", errHas: "holds a NUL byte"},
	{name: "invalid UTF-8 in a value", in: "A=" + envSecret + "\xc3\x28\n", errHas: "not UTF-8 text"},
	{name: "invalid UTF-8 even in a comment (systemd checks only names and values)", in: "# \xff\nA=" + envSecret + "\n",
		errHas: "not UTF-8 text"},
}

func (r envFileRow) wantsError() bool { return r.errLine != 0 || r.errHas != "" }

func TestParseEnvFile(t *testing.T) {
	for _, r := range envFileRows {
		t.Run(r.name, func(t *testing.T) {
			got, err := parseEnvFile([]byte(r.in))
			if r.wantsError() {
				if err == nil {
					t.Fatalf("parsed as %v, want an error", got)
				}
				msg := err.Error()
				if r.errLine != 0 && !strings.HasPrefix(msg, fmt.Sprintf("line %d: ", r.errLine)) {
					t.Errorf("error %q, want it to start with line %d", msg, r.errLine)
				}
				if r.errLine == 0 && strings.Contains(msg, "line") {
					t.Errorf("error %q names a line; want an error about the whole file", msg)
				}
				if !strings.Contains(msg, r.errHas) {
					t.Errorf("error %q, want it to say %q", msg, r.errHas)
				}
				if strings.Contains(msg, envSecret) {
					t.Errorf("error %q shows the value", msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			values := map[string]string{}
			for name, v := range got {
				values[name] = v.value
			}
			if !maps.Equal(values, r.want) {
				t.Errorf("got %q, want %q", values, r.want)
			}
			for name, line := range r.lines {
				if got[name].line != line {
					t.Errorf("%s on line %d, want %d", name, got[name].line, line)
				}
			}
		})
	}
}

func TestReadEnvFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := readEnvFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want not exist", err)
	}

	// A file of exactly maxConfigFile bytes is read; one byte more is refused before parsing.
	body := "A=1\n# " + strings.Repeat("x", maxConfigFile-len("A=1\n# ")-1) + "\n"
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readEnvFile(exact)
	if err != nil || got["A"].value != "1" {
		t.Errorf("file of maxConfigFile bytes: %v, %v", got, err)
	}
	over := filepath.Join(dir, "over")
	if err := os.WriteFile(over, []byte(body+"B="+envSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = readEnvFile(over)
	if err == nil || !strings.Contains(err.Error(), "longer than "+strconv.Itoa(maxConfigFile)) {
		t.Errorf("file over maxConfigFile: %v, want longer than %d bytes", err, maxConfigFile)
	}
	// A NUL byte in the part never read does not matter: the size is the error.
	if err := os.WriteFile(over, []byte(body+"\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = readEnvFile(over); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("file over maxConfigFile ending in NUL: %v, want longer than", err)
	}
	// A directory is an error, not an empty file.
	if _, err := readEnvFile(dir); err == nil {
		t.Error("a directory read as a file")
	}
}

// quoteEnv writes name=value so that parseEnvFile reads value back: in single quotes when
// it holds none, else in double quotes with \ " ` $ escaped.
func quoteEnv(name, value string) string {
	if !strings.Contains(value, "'") {
		return name + "='" + value + "'\n"
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", `$`, `\$`)
	return name + `="` + r.Replace(value) + "\"\n"
}

// envBadLines are lines appended to a good file, each with its exact error after "line N: ".
var envBadLines = []struct{ line, err string }{
	{"no equals " + envSecret + "\n", `no "=" (want NAME=value, or # for a comment)`},
	{"1X=" + envSecret + "\n", `the text before "=" is not a variable name (letters, digits and _, not starting with a digit)`},
	{"KEY " + envSecret + "==\n", `the text before "=" is not a variable name (letters, digits and _, not starting with a digit)`},
	{"Q='" + envSecret + "\n", "Q: a ' quote is not closed"},
	{"Q=\"" + envSecret + "\\\"\n", `Q: a " quote is not closed`},
	{"Q='" + envSecret + "'" + envSecret + "\n", "Q: text after the closing quote"},
}

// envErrRE is every error parseEnvFile gives about a line: the only text of the file it may
// hold is the name of an assignment, when that is a valid name.
var envErrRE = regexp.MustCompile(`^line ([0-9]+): (?:` +
	`(no "=") \(want NAME=value, or # for a comment\)` +
	`|(the text before "=" is not a variable name) \(letters, digits and _, not starting with a digit\)` +
	`|([A-Za-z_][A-Za-z0-9_]*): (?:a ' quote is not closed|a " quote is not closed|text after the closing quote)` +
	`)$`)

// FuzzEnvFile checks, for any input: parseEnvFile does not panic; an accepted input's
// assignments are each on the line recorded, start it, and read back the same when written
// quoted; a bad line after them is reported on its exact line with its exact error; a
// refused input's error is one of a fixed set, naming the line a logical line starts on
// (everything before it parses) and holding no text of the file but a valid name found
// right there.
func FuzzEnvFile(f *testing.F) {
	for _, r := range envFileRows {
		f.Add([]byte(r.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseEnvFile(data)
		if err != nil {
			checkEnvFileError(t, data, err)
			return
		}
		text := strings.TrimPrefix(string(data), "\uFEFF")
		physical := strings.Split(text, "\n")

		// Each assignment's line starts with its name and "=".
		names := slices.Collect(maps.Keys(got))
		slices.SortFunc(names, func(a, b string) int { return got[a].line - got[b].line })
		for i, name := range names {
			v := got[name]
			if !validEnvName(name) {
				t.Fatalf("accepted name %q", name)
			}
			if i > 0 && got[names[i-1]].line == v.line {
				t.Fatalf("%s and %s both on line %d", names[i-1], name, v.line)
			}
			if v.line < 1 || v.line > len(physical) {
				t.Fatalf("%s on line %d of %d", name, v.line, len(physical))
			}
			head, _, ok := strings.Cut(physical[v.line-1], "=")
			if !ok || strings.Trim(head, " \t\r") != name {
				t.Fatalf("%s recorded on line %d, which is %q", name, v.line, physical[v.line-1])
			}
			if strings.IndexByte(v.value, 0) >= 0 || !utf8.ValidString(v.value) {
				t.Fatalf("%s: value %q", name, v.value)
			}
		}

		// Written back quoted, in order, the values and lines are the same.
		var out strings.Builder
		wantLine := map[string]int{}
		line := 1
		for _, name := range names {
			wantLine[name] = line
			q := quoteEnv(name, got[name].value)
			out.WriteString(q)
			line += strings.Count(q, "\n")
		}
		again, err := parseEnvFile([]byte(out.String()))
		if err != nil {
			t.Fatalf("written back as %q: %v", out.String(), err)
		}
		if len(again) != len(got) {
			t.Fatalf("written back as %q: %d names, want %d", out.String(), len(again), len(got))
		}
		for name, v := range got {
			if w := again[name]; w.value != v.value || w.line != wantLine[name] {
				t.Fatalf("%s=%q on line %d read back as %q on line %d (from %q)", name, v.value, wantLine[name], w.value, w.line, out.String())
			}
		}

		// A bad line after them: its own line, its own error, nothing of the values.
		bad := envBadLines[len(data)%len(envBadLines)]
		_, err = parseEnvFile([]byte(out.String() + bad.line))
		want := fmt.Sprintf("line %d: %s", line, bad.err)
		if err == nil || err.Error() != want {
			t.Fatalf("after %q, %q gave %v, want %s", out.String(), bad.line, err, want)
		}
	})
}

// checkEnvFileError checks parseEnvFile's error err for data.
func checkEnvFileError(t *testing.T, data []byte, err error) {
	t.Helper()
	msg := err.Error()
	if !utf8.Valid(data) {
		if msg != "not UTF-8 text" {
			t.Fatalf("invalid UTF-8 gave %q", msg)
		}
		return
	}
	text := strings.TrimPrefix(string(data), "\uFEFF")
	if strings.IndexByte(text, 0) >= 0 {
		if msg != "holds a NUL byte" {
			t.Fatalf("NUL gave %q", msg)
		}
		return
	}
	m := envErrRE.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("error %q is none of parseEnvFile's", msg)
	}
	n, _ := strconv.Atoi(m[1])
	physical := strings.Split(text, "\n")
	if n < 1 || n > len(physical) {
		t.Fatalf("error %q names a line past the %d of the file", msg, len(physical))
	}
	// The line starts a logical line: all before it is good.
	before := strings.Join(physical[:n-1], "\n")
	if n > 1 {
		before += "\n"
	}
	if _, err := parseEnvFile([]byte(before)); err != nil {
		t.Fatalf("error %q, but the lines before it give %v", msg, err)
	}
	l := physical[n-1]
	head, _, hasEq := strings.Cut(l, "=")
	head = strings.Trim(head, " \t\r")
	switch {
	case m[2] != "":
		if hasEq {
			t.Fatalf("error %q for line %q, which has one", msg, l)
		}
	case m[3] != "":
		if !hasEq || validEnvName(head) {
			t.Fatalf("error %q for line %q", msg, l)
		}
	default:
		if !hasEq || head != m[4] {
			t.Fatalf("error %q for line %q", msg, l)
		}
	}
}

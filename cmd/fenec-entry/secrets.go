package main

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// warning is a setting that works but is probably a mistake: logged at warn at start, naming
// the flag, never its value.
type warning struct {
	flag string
	msg  string
}

// warnSecrets finds secrets left where other users of the host can read them: a secret flag
// given on the command line (ps shows every process's arguments to every user), and a file
// holding a secret (--config's, when it holds one; --tls-key's) that every user may read.
// Off Unix, file modes say nothing of who may read a file, and only the command line is
// looked at.
func (in input) warnSecrets() []warning {
	var out []warning
	inFile := false
	for _, d := range flags {
		if !d.secret {
			continue
		}
		if _, ok := in.cmdline[d.name]; ok {
			out = append(out, warning{d.name, fmt.Sprintf("--%s is given on the command line, where ps shows it "+
				"to every user of this host; give it in the environment (%s) or the --config file", d.name, d.envName())})
		} else if in.shadow[d.name] {
			inFile = true
		}
	}
	if inFile {
		if w, ok := openToAll("config", in.path, "holds a secret"); ok {
			out = append(out, w)
		}
	}
	if p := in.texts["tls-key"]; p != "" {
		if w, ok := openToAll("tls-key", p, "is the TLS private key"); ok {
			out = append(out, w)
		}
	}
	return out
}

// openToAll is the warning for a file holding a secret whose mode lets every user of the host
// read or write it; false when it does not, or it cannot be looked at (the flag's own check
// says why), or off Unix.
func openToAll(flag, path, what string) (warning, bool) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return warning{}, false
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o007 == 0 {
		return warning{}, false
	}
	return warning{flag, fmt.Sprintf("--%s: %s %s and every user of this host may read it (mode %04o); "+
		"make it 0600, or 0640 with the entry's group (chmod o-rwx)", flag, path, what, st.Mode().Perm()&fs.ModePerm)}, true
}

package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

const (
	plantedToken = "planted-entry-token-7d1e"
	plantedRPC   = "planted-rpc-auth-93fa"
)

var plantedKey = []byte("planted-gossip-key-0123456789abc") // 32 bytes

// secretConfig is a valid Config holding planted secrets.
func secretConfig(t *testing.T) Config {
	c := validConfig(t)
	c.EntryToken = plantedToken
	c.RPCAuth = plantedRPC
	c.GossipKey = plantedKey
	return c
}

// leaks reports which planted secret s shows, in any encoding a printer might use.
func leaks(s string) string {
	for _, secret := range []string{plantedToken, plantedRPC, string(plantedKey)} {
		for _, form := range []string{secret, fmt.Sprintf("%x", secret), fmt.Sprint([]byte(secret)), fmt.Sprintf("%q", secret)} {
			if strings.Contains(s, form) {
				return form
			}
		}
	}
	return ""
}

func TestConfigNeverPrintsSecrets(t *testing.T) {
	c := secretConfig(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"String":   c.String(),
		"GoString": c.GoString(),
	}
	// Every verb, on the value, the pointer and the fields (a variable format, so that vet
	// lets the wrong ones through: they are the point).
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%X", "%q", "%T"} {
		outputs[verb] = fmt.Sprintf(verb, c)
		outputs["pointer "+verb] = fmt.Sprintf(verb, &c)
		outputs["fields "+verb] = fmt.Sprintf(verb+" "+verb+" "+verb, c.EntryToken, c.GossipKey, c.RPCAuth)
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs["json"] = string(j)

	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Object("config", c).Msg("object")
	log.Info().Interface("config", c).Msg("interface")
	log.Info().Any("token", c.EntryToken).Any("key", c.GossipKey).Stringer("rpc", c.RPCAuth).Msg("fields")
	log.Info().Msgf("%v %+v", c, c)
	outputs["zerolog"] = buf.String()

	for name, out := range outputs {
		if what := leaks(out); what != "" {
			t.Errorf("%s shows a secret (%s): %s", name, what, out)
		}
	}
	for _, want := range []string{"entry_token=set", "gossip_key=set", "rpc_auth=set", "pop=ams"} {
		if !strings.Contains(c.String(), want) {
			t.Errorf("String() = %s, want it to contain %q", c.String(), want)
		}
	}
	if !strings.Contains(outputs["json"], `"EntryToken":"[redacted]"`) {
		t.Errorf("json = %s, want the token shown as [redacted]", outputs["json"])
	}
}

func TestValidateErrorsNeverHoldSecrets(t *testing.T) {
	c := secretConfig(t)
	c.GossipKey = append(SecretBytes(nil), plantedKey[:20]...)
	if err := c.Validate(); err == nil || leaks(err.Error()) != "" {
		t.Errorf("Validate() = %v", err)
	}
	c = secretConfig(t)
	c.EntryToken = plantedToken + "\n"
	if err := c.Validate(); err == nil || leaks(err.Error()) != "" {
		t.Errorf("Validate() = %v", err)
	}
}

func TestUnsetSecretsPrintEmpty(t *testing.T) {
	var s Secret
	if got := fmt.Sprintf("%v|%s|%#v", s, s, SecretBytes(nil)); got != "||" {
		t.Errorf("unset secrets print %q, want empty", got)
	}
	if got := validConfig(t).String(); !strings.Contains(got, "entry_token=unset") {
		t.Errorf("String() = %s", got)
	}
}

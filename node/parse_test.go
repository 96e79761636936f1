package node

import (
	"reflect"
	"testing"
)

func TestDefaultContinents(t *testing.T) {
	got := DefaultContinents([]string{"us", "ap"})
	want := map[string]string{"NA": "us", "SA": "us", "AS": "ap", "OC": "ap", "AN": "ap"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultContinents = %v, want %v", got, want)
	}
	if got := DefaultContinents([]string{"fra"}); got == nil || len(got) != 0 {
		t.Errorf("DefaultContinents(fra) = %v, want empty", got)
	}
}

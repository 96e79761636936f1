package proxy

import (
	"net/url"
	"strings"
	"testing"
)

func TestTenantOf(t *testing.T) {
	long := strings.Repeat("a", 255)
	rows := []struct {
		name       string
		requestURI string // as the client sent it; decoded once like net/http
		tenant     string
		kind       pathKind
	}{
		{"plain", "/t/acme/items/1", "acme", pathTenant},
		{"tenant only", "/t/acme", "acme", pathTenant},
		{"tenant and slash", "/t/acme/", "acme", pathTenant},
		{"escaped underscore", "/t/acme/%5Freplication", "acme", pathTenant},
		{"escaped slash splits the tenant", "/t/acme%2F_replication", "acme", pathTenant},
		{"escaped tenant letters", "/t/%61cme/x", "acme", pathTenant},
		{"255 bytes", "/t/" + long + "/x", long, pathTenant},
		{"256 bytes", "/t/" + long + "a/x", "", pathBad},
		{"empty tenant", "/t//x", "", pathBad},
		{"bare /t/", "/t/", "", pathBad},
		{"bare /t", "/t", "", pathBad},
		{"NUL", "/t/ac%00me/x", "", pathBad},
		// Once, a NUL after the tenant reached the router.
		{"NUL at the end", "/t/acme/items/1%00", "", pathBad},
		{"NUL right after the tenant", "/t/acme%00/items", "", pathBad},
		{"NUL as the rest", "/t/acme/%00", "", pathBad},
		{"NUL mid-rest", "/t/acme/it%00ems/1", "", pathBad},
		{"NUL outside /t/", "/items/1%00", "", pathBad},
		{"NUL after /t", "/t%00", "", pathBad},
		{"NUL alone", "/%00", "", pathBad},
		{"escaped percent is no NUL (decoded once)", "/t/acme/%2500", "acme", pathTenant},
		{"outside /t/", "/items/1", "", pathOther},
		{"root", "/", "", pathOther},
		{"tea is not t", "/tea/x", "", pathOther},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			u, err := url.ParseRequestURI(row.requestURI)
			if err != nil {
				t.Fatal(err)
			}
			tenant, kind := tenantOf(u.Path)
			if tenant != row.tenant || kind != row.kind {
				t.Errorf("tenantOf(%q) = %q, %v; want %q, %v", u.Path, tenant, kind, row.tenant, row.kind)
			}
		})
	}
}

func TestTenantOfDoesNotAllocate(t *testing.T) {
	for _, p := range []string{"/t/acme/items/1", "/t/acme/items/1\x00", "/items/1"} {
		if n := testing.AllocsPerRun(100, func() { tenantOf(p) }); n != 0 {
			t.Errorf("tenantOf(%q) allocates %v times", p, n)
		}
	}
}

// FuzzTenantOf: any request target net/http accepts decodes to a tenant that
// is a non-empty segment of at most 255 bytes without NUL or slash, found
// right after /t/, or is judged bad or outside /t/; a path holding a NUL is
// always bad; it never panics.
func FuzzTenantOf(f *testing.F) {
	for _, s := range []string{"/t/acme/items/1", "/t/acme%2F_replication", "/t/acme/%5Freplication",
		"/t//x", "/t/ac%00me", "/t/acme/items/1%00", "/x%00", "/t/%zz", "/x", "/t/" + strings.Repeat("b", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return // net/http answers these itself, plain 400
		}
		tenant, kind := tenantOf(u.Path)
		if strings.IndexByte(u.Path, 0) >= 0 && kind != pathBad {
			t.Fatalf("%q holds a NUL but is judged %v", u.Path, kind)
		}
		switch kind {
		case pathTenant:
			if tenant == "" || len(tenant) > maxTenantLen || strings.ContainsAny(tenant, "/\x00") {
				t.Fatalf("bad tenant %q from %q", tenant, u.Path)
			}
			if !strings.HasPrefix(u.Path, "/t/"+tenant) {
				t.Fatalf("tenant %q is not the first segment of %q", tenant, u.Path)
			}
			rest := u.Path[len("/t/"+tenant):]
			if rest != "" && rest[0] != '/' {
				t.Fatalf("tenant %q cut mid-segment in %q", tenant, u.Path)
			}
		case pathBad:
			if !strings.HasPrefix(u.Path, "/t/") && u.Path != "/t" && strings.IndexByte(u.Path, 0) < 0 {
				t.Fatalf("%q judged bad but is outside /t/ and holds no NUL", u.Path)
			}
		case pathOther:
			if strings.HasPrefix(u.Path, "/t/") {
				t.Fatalf("%q under /t/ judged outside", u.Path)
			}
		}
	})
}

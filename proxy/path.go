package proxy

import "strings"

// pathKind says what a request path names.
type pathKind uint8

const (
	pathTenant pathKind = iota // /t/<tenant>/...: routed by the tenant's home
	pathOther                  // outside /t/: routed like a tenant heard nowhere, teaches nothing
	pathBad                    // a NUL anywhere, or under /t/ but no valid tenant: 400 bad_path
)

// tenantOf judges a path that has been percent-decoded once (net/http's
// URL.Path), as the routers decode it, so /t/acme%2F_replication and
// /t/acme/%5Freplication both name tenant "acme". The tenant is the first
// segment after /t/; empty or longer than 255 bytes is bad. A NUL anywhere in
// the path is bad, after the tenant and outside /t/ too: no router is shown a
// path that a C string, a file name or a log line would cut short.
// It does not allocate: the tenant is a substring of path.
func tenantOf(path string) (string, pathKind) {
	if strings.IndexByte(path, 0) >= 0 {
		return "", pathBad
	}
	if !strings.HasPrefix(path, "/t/") {
		if path == "/t" {
			return "", pathBad
		}
		return "", pathOther
	}
	rest := path[3:]
	tenant := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		tenant = rest[:i]
	}
	if tenant == "" || len(tenant) > maxTenantLen {
		return "", pathBad
	}
	return tenant, pathTenant
}

package config

// secrets decodes the top-level `secrets:` key: a list of environment
// variable names whose values are redacted from every output, whatever
// the names look like.
func (d *decoder) secrets(e entry) []string {
	nodes, ok := d.list(e)
	if !ok {
		return nil
	}
	var out []string
	for i, n := range nodes {
		kv := item(n, e.path, i)
		s, ok := d.str(kv)
		if !ok {
			continue
		}
		if !envName.MatchString(s) {
			d.fail(n, kv.path, "must be an environment variable name (letters, digits, _), got %q", s)
			continue
		}
		out = append(out, s)
	}
	return out
}

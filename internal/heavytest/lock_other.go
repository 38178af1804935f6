//go:build !unix

package heavytest

// lock does nothing here: the suites run at once, as before.
func lock(string, func()) (bool, error) { return false, nil }

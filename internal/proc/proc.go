// Package proc holds the few process operations whose system calls differ
// between operating systems (one file per OS family), so that the packages
// that need them build for Linux, macOS and Windows alike.
package proc

//go:build fairwaychaos && !unix

package coordinator

// chaosStopSelf cannot stop a process here: the freeze hook does nothing.
func chaosStopSelf() {}

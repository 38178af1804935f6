package cli

import (
	"fmt"
	"net"
)

// checkDevListen refuses a dev.nats-addr that other machines can reach
// while fairway dev's NATS has no authentication (authOn false): anyone on
// the network could then submit, cancel and read every tenant's jobs, and
// impersonate executors. A host name counts as loopback only if every
// address it resolves to is.
func checkDevListen(addr string, authOn bool) error {
	if authOn {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dev.nats-addr %s: %w", addr, err)
	}
	if !loopbackHost(host) {
		return fmt.Errorf("dev.nats-addr %s is not a loopback address: fairway dev's NATS has no authentication unless --tenants is given; listen on 127.0.0.1 or pass --tenants", addr)
	}
	return nil
}

// loopbackHost tells whether host names only loopback addresses. "" and
// the unspecified addresses (0.0.0.0, ::) listen on every interface.
func loopbackHost(host string) bool {
	if host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

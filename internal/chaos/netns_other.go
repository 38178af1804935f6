//go:build !linux

package chaos

import (
	"errors"
	"net"
)

func (n *Netns) listen(string) (net.Listener, error) {
	return nil, errors.New("network namespaces need Linux")
}

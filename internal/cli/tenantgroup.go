package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/fairwayhq/fairway"
	"github.com/nats-io/jwt/v2"
	"github.com/spf13/cobra"
)

// tenantGroup is the group of the tenant whose credential the command
// connects with: nats.creds holds a user JWT named tenant-<group>, as
// 'fairway creds add tenant' and 'fairway dev --tenants' issue them. ""
// for another credential, or none.
func (e *env) tenantGroup() string {
	if e.cfg == nil || e.cfg.NATS.Creds == "" {
		return ""
	}
	data, err := os.ReadFile(e.cfg.NATS.Creds)
	if err != nil {
		return "" // the connection says what is wrong with the file
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return ""
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return ""
	}
	group, ok := strings.CutPrefix(claims.Name, "tenant-")
	if !ok || fairway.CheckName("group", group) != nil {
		return ""
	}
	return group
}

// groupOrTenant fills cmd's --group, when it is not given, with the group
// of the tenant whose credential the command connects with (a tenant
// reaches its own group only). Otherwise a command that needs one is told
// so (why: what the group is for), before any connection.
func (e *env) groupOrTenant(cmd *cobra.Command, why string) error {
	f := cmd.Flags().Lookup("group")
	if f == nil || f.Value.String() != "" {
		return nil
	}
	if g := e.tenantGroup(); g != "" {
		return cmd.Flags().Set("group", g)
	}
	if why == "" {
		return nil // optional: the operator API
	}
	return usageError{fmt.Errorf("--group is required: %s (with a tenant's credential, --creds, its own group is the default)", why)}
}

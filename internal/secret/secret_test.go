package secret_test

import (
	"testing"

	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/stretchr/testify/require"
)

func TestMask(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"postgres://u:secret@h/db", "postgres://u:****@h/db"},
		{"postgres://u@h/db", "postgres://u@h/db"}, // a PostgreSQL user alone is no secret
		{"postgres://h/db?password=secret", "postgres://h/db?password=****"},
		{"postgres://h/db?sslmode=verify-full&password=secret&x=1", "postgres://h/db?sslmode=verify-full&password=****&x=1"},
		{"postgres://u:p%40ss@h/db?x=1", "postgres://u:****@h/db?x=1"},
		{"postgres://u:p@ss@h/db", "postgres://u:****@h/db"}, // an unescaped @ in the password
		{"postgres://u:secret@h1:5432,h2:5433/db", "postgres://u:****@h1:5432,h2:5433/db"},
		{"nats://u:secret@h:4222", "nats://u:****@h:4222"},
		{"nats://s3cr3tt0ken@h:4222", "nats://****@h:4222"}, // a NATS user alone is a token
		{"tls://s3cr3tt0ken@h:4222", "tls://****@h:4222"},
		{"nats://a:secret1@h1:4222,nats://tok2@h2:4222, tls://b:secret3@h3", "nats://a:****@h1:4222,nats://****@h2:4222, tls://b:****@h3"},
		{"nats://h1:4222,nats://h2:4222", "nats://h1:4222,nats://h2:4222"},
		{"host=h user=u password=secret", "host=h user=u password=****"},
		{"host=h password='se cret' user=u", "host=h password=**** user=u"},
		{`host=h password='it\'s secret' user=u`, "host=h password=**** user=u"},
		{`host=h password=se\ cret user=u`, "host=h password=**** user=u"},
		{"host=h password = secret dbname=db", "host=h password = **** dbname=db"},
		{"host=h PASSWORD=secret", "host=h PASSWORD=****"},
		{"host=h sslpassword=secret sslmode=verify-full", "host=h sslpassword=**** sslmode=verify-full"},
		{"host=h password='unterminated secret", "host=h password=****"},
		// whole error messages
		{"connecting to NATS at nats://u:secret@127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused",
			"connecting to NATS at nats://u:****@127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused"},
		{"database url: cannot parse `host=h port=x password = secret`: invalid port", "database url: cannot parse `host=h port=x password = **** invalid port"},
		{"no password here: user@example.com", "no password here: user@example.com"},
	} {
		got := secret.Mask(tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.NotContains(t, got, "secret", tc.in)
	}
}

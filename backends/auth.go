package backends

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
)

// Credentials say how a client proves who it is to servers lockbench did
// not start (bench run -targets). A value is never written anywhere: the
// scenario and the targets file name environment variables, and each
// process reads them when it connects; TLS material comes from files. Nil
// Credentials (the servers lockbench starts) mean none.
type Credentials struct {
	UsernameEnv string    `yaml:"username_env" json:"username_env,omitempty"`
	PasswordEnv string    `yaml:"password_env" json:"password_env,omitempty"`
	TokenEnv    string    `yaml:"token_env" json:"token_env,omitempty"` // Consul ACL token
	TLS         *TLSFiles `yaml:"tls" json:"tls,omitempty"`
	// Database is the PostgreSQL database to use (default postgres).
	Database string `yaml:"database" json:"database,omitempty"`
}

// TLSFiles locate a client's TLS material.
type TLSFiles struct {
	CAFile             string `yaml:"ca_file" json:"ca_file,omitempty"`
	CertFile           string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile            string `yaml:"key_file" json:"key_file,omitempty"`
	ServerName         string `yaml:"server_name" json:"server_name,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" json:"insecure_skip_verify,omitempty"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check says what is wrong with c: a malformed or unset variable, a TLS
// file that cannot be read. It reads the variables, never reports them.
func (c *Credentials) Check() error {
	if c == nil {
		return nil
	}
	var errs []error
	for field, name := range map[string]string{"username_env": c.UsernameEnv, "password_env": c.PasswordEnv, "token_env": c.TokenEnv} {
		if name == "" {
			continue
		}
		if !envName.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: %q is not an environment variable name", field, name))
		} else if _, ok := os.LookupEnv(name); !ok {
			errs = append(errs, fmt.Errorf("%s: the environment variable %s is not set", field, name))
		}
	}
	if c.TLS != nil {
		if _, err := c.TLSConfig(); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (c *Credentials) env(name string) string {
	if c == nil || name == "" {
		return ""
	}
	return os.Getenv(name)
}

// Username, Password and Token read the credentials from the environment.
func (c *Credentials) Username() string {
	if c == nil {
		return ""
	}
	return c.env(c.UsernameEnv)
}

// Password reads the password from the environment.
func (c *Credentials) Password() string {
	if c == nil {
		return ""
	}
	return c.env(c.PasswordEnv)
}

// Token reads the token from the environment.
func (c *Credentials) Token() string {
	if c == nil {
		return ""
	}
	return c.env(c.TokenEnv)
}

// TLSConfig builds the client's TLS configuration, or nil for none.
func (c *Credentials) TLSConfig() (*tls.Config, error) {
	if c == nil || c.TLS == nil {
		return nil, nil
	}
	t := c.TLS
	cfg := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// TLSDial wraps dial so that every connection it makes speaks TLS with cfg
// (nil: dial unchanged). Client libraries that do their own TLS only with
// their own dialer (go-redis) get it this way on the routed, counted
// connections every client must use.
func TLSDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if cfg == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			c.ServerName = host
		}
		tc := tls.Client(raw, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}

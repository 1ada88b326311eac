package sandbox

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// modulePath identifies the project's root module when looking for .bin.
const modulePath = "github.com/kube-convergence/kube-convergence-exporter"

// findBinDir returns $KCE_BIN_DIR, or .bin next to the go.mod of this
// project found by walking up from the working directory (go test runs in the
// package directory, make demo in the repository root).
func findBinDir() (string, error) {
	if d := os.Getenv("KCE_BIN_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the bin dir: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if moduleOf(filepath.Join(dir, "go.mod")) == modulePath {
			return filepath.Join(dir, ".bin"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s; set KCE_BIN_DIR or Options.BinDir", modulePath, wd)
		}
	}
}

// moduleOf returns the module path declared in a go.mod file, or "".
func moduleOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`)
		}
	}
	return ""
}

// binary returns the path of a component binary, or an error that says how
// to build it.
func binary(binDir, name string) (string, error) {
	p := filepath.Join(binDir, name)
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%s not found in %s (build it with tools/build.sh): %w", name, binDir, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}

// newToken returns a random bearer token: 128 bits, hex encoded.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeServiceAccountKeys writes an RSA key pair for signing and verifying
// service-account tokens. 2048 bits: generation takes about 50 ms here,
// against over a second for 4096, and nothing outside loopback trusts it.
func writeServiceAccountKeys(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating the service-account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the service-account key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding the service-account public key: %w", err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return fmt.Errorf("writing the service-account public key: %w", err)
	}
	return nil
}

// kubeconfigFile is the subset of the kubeconfig format the sandbox writes.
// It is written as JSON, which is valid YAML and which clientcmd reads, so
// the package needs neither clientcmd nor a YAML library.
type kubeconfigFile struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
	Preferences    struct{}       `json:"preferences"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
		InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
		TLSServerName            string `json:"tls-server-name,omitempty"`
	} `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		Token string `json:"token,omitempty"`
	} `json:"user"`
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster string `json:"cluster"`
		User    string `json:"user"`
	} `json:"context"`
}

// writeKubeconfig writes a kubeconfig with one cluster, user and context
// ("sandbox") taken from cfg. Only what the sandbox itself puts into a
// rest.Config is supported: bearer token, CA data or file, insecure,
// server name.
func writeKubeconfig(path string, cfg *rest.Config) error {
	if cfg == nil {
		return errors.New("writing kubeconfig: nil rest.Config")
	}
	if cfg.BearerTokenFile != "" || cfg.Username != "" || len(cfg.CertData) > 0 || cfg.CertFile != "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		return fmt.Errorf("writing kubeconfig %s: only bearer-token configs are supported", path)
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return fmt.Errorf("writing kubeconfig %s: reading CA: %w", path, err)
		}
		ca = b
	}
	const name = "sandbox"
	kc := kubeconfigFile{APIVersion: "v1", Kind: "Config", CurrentContext: name}
	var c namedCluster
	c.Name = name
	c.Cluster.Server = cfg.Host
	c.Cluster.CertificateAuthorityData = ca
	c.Cluster.InsecureSkipTLSVerify = cfg.Insecure
	c.Cluster.TLSServerName = cfg.ServerName
	var u namedUser
	u.Name = name
	u.User.Token = cfg.BearerToken
	var x namedContext
	x.Name = name
	x.Context.Cluster = name
	x.Context.User = name
	kc.Clusters = []namedCluster{c}
	kc.Users = []namedUser{u}
	kc.Contexts = []namedContext{x}
	b, err := json.MarshalIndent(kc, "", "  ")
	if err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/certs"
)

func (a *app) certsCommand() *cobra.Command {
	cmd := group("certs", "Create certificates for mutual TLS between the cluster's processes")
	cmd.AddCommand(a.certsInitCommand())
	return cmd
}

func (a *app) certsInitCommand() *cobra.Command {
	var hosts []string
	var force bool
	cmd := &cobra.Command{
		Use:   "init DIR --hosts HOST,...",
		Short: "Create a CA and a certificate for each host and for the CLI",
		Long: fmt.Sprintf(`init creates a private CA in DIR (%s, %s) and, signed by it, a
certificate and key for each host (HOST.pem, HOST-key.pem) and for this CLI
(%s.pem, %s-key.pem). Each certificate is valid for its name, localhost and
127.0.0.1, as a server and as a client, for %d days; the CA for %d years.
Keys are ECDSA P-256, readable by their owner only. Start every daemon with
--tls-cert HOST.pem --tls-key HOST-key.pem --tls-ca %s, and run weir with the
client's (or set WEIR_TLS_CERT, WEIR_TLS_KEY, WEIR_TLS_CA).

An existing CA is not replaced without --force: the certificates it signed
would no longer be trusted.`, certs.CAFile, certs.CAKeyFile, certs.ClientName, certs.ClientName,
			int(certs.LeafValidity.Hours()/24), int(certs.CAValidity.Hours()/24/365), certs.CAFile),
		Args: exactArgs("DIR"),
		RunE: func(_ *cobra.Command, args []string) error {
			written, err := certs.Init(args[0], hosts, force)
			for _, f := range written {
				fmt.Fprintln(a.stdout, f)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "CA %s; start each daemon with its HOST.pem, HOST-key.pem and %[1]s\n", filepath.Join(args[0], certs.CAFile))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&hosts, "hosts", nil, "comma-separated host names or IP addresses, one certificate each (required)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing CA, and with it the trust in every certificate it signed")
	_ = cmd.MarkFlagRequired("hosts")
	return cmd
}

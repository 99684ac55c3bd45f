// HTTPS for the API (serve --ssl-certfile, --ssl-keyfile, --ssl-ca-certs, --ssl-cert-reqs, as
// vLLM's) and the OpenSSL server context they make; every file is read and checked here so that
// a mistake is refused naming the flag, the file and the problem, not a silent invalid server.
#pragma once

#include <string>

#include "base/status.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX: kept out of this header

namespace sy::http {

struct TlsSettings {
  std::string certfile;  // PEM: the server's certificate, then any intermediate CAs
  std::string keyfile;   // PEM: its private key, unencrypted
  std::string ca_certs;  // PEM: the CAs that sign the client certificates
  // Python's ssl.VerifyMode, as vLLM takes it: 0 none (clients are not asked for a
  // certificate), 1 optional (one that is sent must verify), 2 required.
  int cert_reqs = 0;

  // Any of the flags given: the API speaks HTTPS only (or start-up refuses the combination).
  bool enabled() const { return !certfile.empty() || !keyfile.empty() || !ca_certs.empty() || cert_reqs != 0; }
  // "none", "optional", "required": what clients are asked for.
  const char* client_certificates() const;
};

// Makes `ctx` a server context of the settings: TLS 1.2 or later, the certificate chain, its
// key, and the verification of client certificates. Errors name the flag and file: both or
// neither of cert and key, ca-certs or cert-reqs without them, cert-reqs 1 or 2 without
// ca-certs, a missing or unreadable file, a PEM without a certificate or key, an encrypted key,
// a key that is not the certificate's.
Status configure_tls(ssl_ctx_st& ctx, const TlsSettings& settings);

// The same checks on a scratch context, for a command to refuse its flags before it starts.
// `warning`, when given, says what is served but will fail clients: a certificate expired or not
// yet valid (left empty otherwise).
Status check_tls(const TlsSettings& settings, std::string* warning = nullptr);

}  // namespace sy::http

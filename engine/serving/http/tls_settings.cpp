#include "engine/serving/http/tls_settings.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace sy::http {
namespace {

namespace fs = std::filesystem;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct InfoStackFree {
  void operator()(STACK_OF(X509_INFO) * s) const { sk_X509_INFO_pop_free(s, X509_INFO_free); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

// OpenSSL's reasons for the last failure ("no start line", "key values mismatch"), and a clean
// error queue for whatever this thread does next.
std::string openssl_reason() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    char buf[256];
    if (!reason) {
      ERR_error_string_n(e, buf, sizeof buf);
      reason = buf;
    }
    if (out.find(reason) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + std::string(reason);
  }
  return out.empty() ? std::string() : " (OpenSSL: " + out + ")";
}

// A PEM file's text, refused early when it is missing, not a regular file (a FIFO would block
// start-up) or unreadable, so the error says which and not what OpenSSL makes of it.
StatusOr<std::string> read_pem(const char* flag, const std::string& path) {
  const std::string what = std::string(flag) + " " + path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status::Error(what + ": no such file");
  if (!fs::is_regular_file(st)) return Status::Error(what + ": not a regular file");
  if (const auto size = fs::file_size(path, ec); !ec && size > (16u << 20))
    return Status::Error(what + ": larger than 16 MiB, not a PEM file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(what + ": cannot be read: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error(what + ": cannot be read: " + std::strerror(errno));
  return text.str();
}

Bio memory_bio(const std::string& text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

// Never a terminal prompt for a passphrase: an encrypted key is refused with its own message.
int no_passphrase(char*, int, int, void* asked) {
  *static_cast<bool*>(asked) = true;
  return -1;
}

// "CN=Example CA, O=…": a certificate's subject for a message.
std::string subject(X509* cert) {
  char buf[256];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
  return buf;
}

// An ASN.1 time as OpenSSL prints it ("Jan  1 00:00:00 2020 GMT").
std::string time_text(const ASN1_TIME* t) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || ASN1_TIME_print(bio.get(), t) != 1) return "?";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

bool holds(const std::string& text, const char* label) { return text.find(label) != std::string::npos; }

Status use_certificate_chain(SSL_CTX& ctx, const std::string& path, X509*& leaf) {
  const auto text = read_pem("--ssl-certfile", path);
  if (!text.ok()) return text.status();
  Bio bio = memory_bio(*text);
  Cert first(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!first) {
    const std::string reason = openssl_reason();
    if (holds(*text, "PRIVATE KEY-----") && !holds(*text, "BEGIN CERTIFICATE"))
      return Status::Error("--ssl-certfile " + path + " holds a private key, not a certificate: give the certificate "
                           "to --ssl-certfile and its key to --ssl-keyfile");
    return Status::Error("--ssl-certfile " + path + " holds no PEM certificate ('-----BEGIN CERTIFICATE-----')" +
                         reason);
  }
  if (SSL_CTX_use_certificate(&ctx, first.get()) != 1)
    return Status::Error("--ssl-certfile " + path + ": the certificate cannot be used" + openssl_reason());
  // The intermediates that follow the server's certificate go to clients with it.
  while (Cert next{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (SSL_CTX_add1_chain_cert(&ctx, next.get()) != 1)
      return Status::Error("--ssl-certfile " + path + ": a chain certificate cannot be used" + openssl_reason());
  }
  ERR_clear_error();  // the end of the file reads as "no start line"
  leaf = SSL_CTX_get0_certificate(&ctx);
  return Status::Ok();
}

Status use_private_key(SSL_CTX& ctx, const std::string& path, X509* leaf, const std::string& certfile) {
  const auto text = read_pem("--ssl-keyfile", path);
  if (!text.ok()) return text.status();
  Bio bio = memory_bio(*text);
  bool asked = false;
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, &asked));
  if (!key) {
    const std::string reason = openssl_reason();
    if (asked)
      return Status::Error("--ssl-keyfile " + path + " is encrypted: a passphrase is not supported (decrypt it with "
                           "'openssl pkey -in " + path + " -out NEW.key' and keep that file private)");
    if (holds(*text, "BEGIN CERTIFICATE") && !holds(*text, "PRIVATE KEY-----"))
      return Status::Error("--ssl-keyfile " + path + " holds a certificate, not a private key");
    return Status::Error("--ssl-keyfile " + path + " holds no PEM private key ('-----BEGIN PRIVATE KEY-----')" +
                         reason);
  }
  // Checked here: OpenSSL would otherwise drop the certificate and serve nothing.
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    // A chain written CA first reads as a mismatch: say which certificate was taken.
    const std::string order =
        X509_check_ca(leaf) > 0 ? " (its first certificate, " + subject(leaf) +
                                      ", is a CA's: the server's own certificate must come first, its intermediates "
                                      "after it)"
                                : std::string();
    return Status::Error("--ssl-keyfile " + path + " is not the private key of the certificate in --ssl-certfile " +
                         certfile + order);
  }
  if (SSL_CTX_use_PrivateKey(&ctx, key.get()) != 1 || SSL_CTX_check_private_key(&ctx) != 1)
    return Status::Error("--ssl-keyfile " + path + ": the key cannot be used" + openssl_reason());
  return Status::Ok();
}

// The CAs that client certificates must chain to; also named to clients in the handshake so
// that one holding several certificates can pick.
Status use_client_cas(SSL_CTX& ctx, const std::string& path) {
  const auto text = read_pem("--ssl-ca-certs", path);
  if (!text.ok()) return text.status();
  Bio bio = memory_bio(*text);
  std::unique_ptr<STACK_OF(X509_INFO), InfoStackFree> infos(
      PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr));
  if (!infos) return Status::Error("--ssl-ca-certs " + path + " cannot be read as PEM" + openssl_reason());
  X509_STORE* store = SSL_CTX_get_cert_store(&ctx);
  int certificates = 0;
  for (int i = 0; i < sk_X509_INFO_num(infos.get()); ++i) {
    X509* x = sk_X509_INFO_value(infos.get(), i)->x509;
    if (!x) continue;
    if (X509_STORE_add_cert(store, x) != 1 || SSL_CTX_add_client_CA(&ctx, x) != 1)
      return Status::Error("--ssl-ca-certs " + path + ": a certificate cannot be used" + openssl_reason());
    ++certificates;
  }
  if (certificates == 0)
    return Status::Error("--ssl-ca-certs " + path + " holds no PEM certificate ('-----BEGIN CERTIFICATE-----')");
  return Status::Ok();
}

Status check_combination(const TlsSettings& s) {
  if (s.cert_reqs < 0 || s.cert_reqs > 2)
    return Status::Error("--ssl-cert-reqs " + std::to_string(s.cert_reqs) +
                         " is not 0 (none), 1 (optional) or 2 (required)");
  if (!s.certfile.empty() && s.keyfile.empty())
    return Status::Error("--ssl-certfile needs --ssl-keyfile (the certificate's private key)");
  if (s.certfile.empty() && !s.keyfile.empty())
    return Status::Error("--ssl-keyfile needs --ssl-certfile (the certificate it is the key of)");
  if (s.certfile.empty() && !s.ca_certs.empty())
    return Status::Error("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile: client certificates are verified "
                         "only over HTTPS");
  if (s.certfile.empty() && s.cert_reqs != 0)
    return Status::Error("--ssl-cert-reqs " + std::to_string(s.cert_reqs) +
                         " needs --ssl-certfile and --ssl-keyfile: client certificates are asked for only over HTTPS");
  if (s.cert_reqs != 0 && s.ca_certs.empty())
    return Status::Error("--ssl-cert-reqs " + std::to_string(s.cert_reqs) +
                         " asks clients for certificates: give --ssl-ca-certs FILE, the CAs that sign them (without it "
                         "no client certificate could be verified)");
  return Status::Ok();
}

}  // namespace

const char* TlsSettings::client_certificates() const {
  return cert_reqs == 2 ? "required" : cert_reqs == 1 ? "optional" : "none";
}

Status configure_tls(SSL_CTX& ctx, const TlsSettings& s) {
  ERR_clear_error();
  SY_RETURN_IF_ERROR(check_combination(s));
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  X509* leaf = nullptr;
  SY_RETURN_IF_ERROR(use_certificate_chain(ctx, s.certfile, leaf));
  SY_RETURN_IF_ERROR(use_private_key(ctx, s.keyfile, leaf, s.certfile));
  // As Python's ssl (uvicorn, under vLLM): the CA file is loaded whatever --ssl-cert-reqs says,
  // and clients are asked for a certificate only with 1 or 2.
  if (!s.ca_certs.empty()) SY_RETURN_IF_ERROR(use_client_cas(ctx, s.ca_certs));
  const int mode = s.cert_reqs == 2   ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                   : s.cert_reqs == 1 ? SSL_VERIFY_PEER
                                      : SSL_VERIFY_NONE;
  SSL_CTX_set_verify(&ctx, mode, nullptr);
  // With client verification on, OpenSSL refuses to resume a session (a TLS 1.3 ticket, as
  // curl and browsers send on their next connection) unless the context has an id.
  static const unsigned char kSessionContext[] = "switchyard-api";
  SSL_CTX_set_session_id_context(&ctx, kSessionContext, sizeof kSessionContext - 1);
  return Status::Ok();
}

Status check_tls(const TlsSettings& s, std::string* warning) {
  SY_RETURN_IF_ERROR(check_combination(s));
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return Status::Error("HTTPS: OpenSSL cannot make a server context" + openssl_reason());
  SY_RETURN_IF_ERROR(configure_tls(*ctx, s));
  // Served all the same (as uvicorn does), but every client that verifies it will refuse it.
  if (X509* leaf = SSL_CTX_get0_certificate(ctx.get()); leaf != nullptr && warning != nullptr) {
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0)
      *warning = "the certificate in --ssl-certfile " + s.certfile + " expired on " +
                 time_text(X509_get0_notAfter(leaf)) + ": clients that verify it will refuse the connection";
    else if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0)
      *warning = "the certificate in --ssl-certfile " + s.certfile + " is not valid before " +
                 time_text(X509_get0_notBefore(leaf)) + ": clients that verify it will refuse the connection";
  }
  return Status::Ok();
}

}  // namespace sy::http

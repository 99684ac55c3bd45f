#include "console/app/command_line.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFileInfo>
#include <cmath>
#include <cstdio>

namespace sy::console {

std::optional<CommandLine> parse_command_line(const QStringList& arguments, int& exit_code) {
  QCommandLineParser p;
  p.setApplicationDescription(
      "Switchyard operator console: watch and steer a Switchyard engine through its telemetry stream and control "
      "socket, or open a recorded trace.");
  // Not addHelpOption(): its --help-all lists Qt's own options, which this command line does not
  // take (it is read before Qt starts). Words after one dash are long options, so that a Qt
  // option such as -platform is reported by its name rather than letter by letter.
  p.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
  const QCommandLineOption help({QStringLiteral("h"), QStringLiteral("help")}, "Displays help on commandline options.");
  p.addOption(help);
  p.addVersionOption();
  const QCommandLineOption connect(QStringLiteral("connect"), "Watch the engine whose telemetry stream is at ENDPOINT.", "ENDPOINT");
  const QCommandLineOption control(QStringLiteral("control"), "The engine's control endpoint (default tcp://127.0.0.1:5556).", "ENDPOINT");
  const QCommandLineOption keys(QStringLiteral("keys"), "CURVE: a key directory from `switchyard keys` (server.pub and CLIENT.key).", "DIR");
  const QCommandLineOption client(QStringLiteral("client"), "CURVE: the client key name in --keys DIR (default client).", "NAME", "client");
  const QCommandLineOption server_key(QStringLiteral("server-key"), "CURVE: the engine's public key file.", "FILE");
  const QCommandLineOption client_key(QStringLiteral("client-key"), "CURVE: this console's key pair file.", "FILE");
  const QCommandLineOption open(QStringLiteral("open"), "Open a recorded trace.", "FILE.db");
  const QCommandLineOption screenshot(QStringLiteral("screenshot"), "Save a PNG of the window after --after seconds.", "FILE.png");
  const QCommandLineOption after(QStringLiteral("after"), "Seconds to wait before the screenshot (default 2).", "SECONDS", "2");
  const QCommandLineOption quit(QStringLiteral("quit"), "Exit after the screenshot (status 0 when it was written).");
  p.addOptions({connect, control, keys, client, server_key, client_key, open, screenshot, after, quit});

  exit_code = 0;
  if (!p.parse(arguments)) {
    std::fprintf(stderr, "switchyard-console: error: %s\n", qPrintable(p.errorText()));
    exit_code = 2;
    return std::nullopt;
  }
  if (p.isSet(help)) {
    // Without a QCoreApplication the parser cannot name the program in its usage line.
    QString text = p.helpText();
    text.replace(QStringLiteral("<executable_name>"), QFileInfo(arguments.value(0, "switchyard-console")).fileName());
    std::printf("%s", qPrintable(text));
    return std::nullopt;
  }
  if (p.isSet("version")) {
    std::printf("switchyard-console %s\n", qPrintable(QCoreApplication::applicationVersion()));
    return std::nullopt;
  }
  auto fail = [&](const QString& message) -> std::optional<CommandLine> {
    std::fprintf(stderr, "switchyard-console: error: %s\n", qPrintable(message));
    exit_code = 2;
    return std::nullopt;
  };
  if (!p.positionalArguments().isEmpty()) return fail("unexpected argument " + p.positionalArguments().first());

  CommandLine c;
  if (p.isSet(connect) && p.isSet(open)) return fail("--connect and --open exclude each other");
  if ((p.isSet(control) || p.isSet(keys) || p.isSet(client) || p.isSet(server_key) || p.isSet(client_key)) &&
      !p.isSet(connect))
    return fail("--control, --keys, --client, --server-key and --client-key need --connect");
  // A client name names a key pair in --keys DIR; without the directory it would be dropped
  // and the console would connect without CURVE, which the user did not ask for.
  if (p.isSet(client) && !p.isSet(keys)) return fail("--client needs --keys");
  if (p.isSet(keys) && (p.isSet(server_key) || p.isSet(client_key)))
    return fail("--keys excludes --server-key and --client-key");
  if (p.isSet(server_key) != p.isSet(client_key)) return fail("--server-key and --client-key go together");
  if (p.isSet(connect)) {
    ConnectionSettings s;
    s.telemetry_endpoint = p.value(connect).toStdString();
    if (p.isSet(control)) s.control_endpoint = p.value(control).toStdString();
    s.key_dir = p.value(keys).toStdString();
    s.client_name = p.value(client).toStdString();
    s.server_key_file = p.value(server_key).toStdString();
    s.client_key_file = p.value(client_key).toStdString();
    c.connect = s;
  }
  c.open = p.value(open);
  c.screenshot = p.value(screenshot);
  bool ok = false;
  c.after_seconds = p.value(after).toDouble(&ok);
  // Written so that NaN fails too; the bound keeps seconds * 1000 a valid timer interval (an
  // overflowed or NaN interval never fires, so --quit would never quit).
  if (!ok || !(c.after_seconds >= 0 && c.after_seconds <= kMaxAfterSeconds))
    return fail(QString("--after takes seconds from 0 to %1, not '%2'").arg(kMaxAfterSeconds).arg(p.value(after)));
  c.quit = p.isSet(quit);
  if (p.isSet(after) && c.screenshot.isEmpty() && !c.quit) return fail("--after needs --screenshot or --quit");
  return c;
}

int after_milliseconds(const CommandLine& c) { return static_cast<int>(std::llround(c.after_seconds * 1000)); }

}  // namespace sy::console

// strata: the desktop explorer. `strata [MODEL] [--backend cpu|vulkan] [--device N] [--prompt TEXT] ...`
// With no MODEL, the demonstration model opens (written on first use into the user's data folder).
// --help, --version and the hidden --help-man (the man page, written at build time) need no display: they run
// before the GUI starts, from the same option table.
#include <cstdio>
#include <cstring>

#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>

#include "explorer/main_window.hpp"
#include "explorer/screenshot_run.hpp"

namespace {

struct Options {
    QCommandLineOption backend{QStringLiteral("backend"),
                               QStringLiteral("Where the forward pass runs: cpu or vulkan (default: the last one chosen, "
                                              "else cpu). Without a usable Vulkan device Strata says so and uses the CPU."),
                               QStringLiteral("name")};
    QCommandLineOption device{QStringLiteral("device"),
                              QStringLiteral("The Vulkan device, as `strata-cli devices` numbers them (default: the last "
                                             "one chosen, else the best one)"),
                              QStringLiteral("N")};
    QCommandLineOption prompt{QStringLiteral("prompt"), QStringLiteral("The prompt to run first"), QStringLiteral("text")};
    QCommandLineOption shots{QStringLiteral("screenshot-dir"),
                             QStringLiteral("Save a 1600x1000 screenshot of every view into this folder, then exit"),
                             QStringLiteral("dir")};
    QCommandLineOption man{QStringLiteral("help-man"), QStringLiteral("Print the man page (roff)")};
    QList<QCommandLineOption> all() const { return {backend, device, prompt, shots}; }
};

void describe(QCommandLineParser& cli, Options& o) {
    cli.setApplicationDescription(QStringLiteral(
        "Strata: look inside Llama 3, layer by layer. Opens MODEL (a Hugging Face or Meta folder, or a .gguf file), or "
        "with no MODEL the demonstration model (a tiny Llama 3 trained by Strata on generated English), written on "
        "first run into the user's data folder."));
    cli.addHelpOption();
    cli.addVersionOption();
    cli.addPositionalArgument(QStringLiteral("model"), QStringLiteral("A Hugging Face or Meta folder, or a .gguf file"),
                              QStringLiteral("[model]"));
    cli.addOptions(o.all());
    o.man.setFlags(QCommandLineOption::HiddenFromHelp);
    cli.addOption(o.man);
}

QString roff(QString s) {
    s.replace(QLatin1Char('\\'), QStringLiteral("\\e"));
    s.replace(QLatin1Char('-'), QStringLiteral("\\-"));
    if (s.startsWith(QLatin1Char('.')) || s.startsWith(QLatin1Char('\''))) s.prepend(QStringLiteral("\\&"));
    return s;
}

// strata(1), from the option table --help prints.
void printMan(const Options& o) {
    QString m;
    m += QStringLiteral(".TH STRATA 1 \"\" \"strata %1\" \"User Commands\"\n").arg(QStringLiteral(STRATA_VERSION));
    m += QStringLiteral(".SH NAME\nstrata \\- look inside Llama 3, layer by layer\n");
    m += QStringLiteral(".SH SYNOPSIS\n.B strata\n[\\fIOPTIONS\\fR] [\\fIMODEL\\fR]\n");
    m += QStringLiteral(".SH DESCRIPTION\n") +
         roff(QStringLiteral("Strata is a desktop explorer for Llama 3, 3.1 and 3.2. It runs the real forward pass on "
                             "the CPU or on the GPU through Vulkan, keeps every intermediate tensor, and shows them: "
                             "embeddings, the residual stream after every block, RMSNorm gains, attention, logits, "
                             "each with an annotation card. MODEL is a Hugging Face folder, a Meta folder or a .gguf "
                             "file. Without MODEL, Strata opens its demonstration model: a tiny Llama 3 (3 M "
                             "parameters, the real tokenizer) that Strata trained on generated English, written on "
                             "first run into the user's data folder.")) +
         QStringLiteral("\n");
    m += QStringLiteral(".SH OPTIONS\n.TP\n.BR \\-h \", \" \\-\\-help\nThe options.\n.TP\n.BR \\-v \", \" \\-\\-version\n"
                        "The version.\n");
    for (const QCommandLineOption& opt : o.all()) {
        m += QStringLiteral(".TP\n.B \\-\\-%1").arg(roff(opt.names().constFirst()));
        if (!opt.valueName().isEmpty()) m += QStringLiteral(" \\fI%1\\fR").arg(roff(opt.valueName()));
        m += QStringLiteral("\n%1\n").arg(roff(opt.description()));
    }
    m += QStringLiteral(".SH KEYBOARD\nF1 lists every shortcut. Ctrl+O opens a model folder, Ctrl+R runs the prompt, "
                        "[ and ] step through layers, P plays through them, Ctrl+F finds a token.\n");
    m += QStringLiteral(".SH FILES\n.TP\n.I ~/.config/strata/strata.conf\n") +
         roff(QStringLiteral("Settings: recent models, backend and device, sampling, window layout.")) +
         QStringLiteral("\n.TP\n.I ~/.local/share/strata/strata/demo\n") +
         roff(QStringLiteral("The demonstration model, written on first run.")) +
         QStringLiteral("\n.TP\n.I /usr/share/strata/tokenizer.json\n") +
         roff(QStringLiteral("The Llama 3 tokenizer the demonstration model is made with (a source checkout uses "
                             "~/.cache/strata/tokenizer/tokenizer.json, fetched by scripts/setup).")) +
         QStringLiteral("\n");
    m += QStringLiteral(".SH ENVIRONMENT\n.TP\n.B STRATA_CACHE_DIR\n") +
         roff(QStringLiteral("When set, the tokenizer is looked for in, and the demonstration model written to, this "
                             "folder instead.")) +
         QStringLiteral("\n.TP\n.B QT_QPA_PLATFORM\n") +
         roff(QStringLiteral("offscreen runs without a display (with --screenshot-dir).")) + QStringLiteral("\n");
    m += QStringLiteral(".SH SEE ALSO\n.BR strata\\-cli (1)\n");
    std::fputs(m.toUtf8().constData(), stdout);
}

// --help, --version and --help-man print and exit without a display.
bool wantsTextOnly(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        for (const char* a : {"-h", "--help", "--help-all", "-v", "--version", "--help-man", "-?"})
            if (std::strcmp(argv[i], a) == 0) return true;
    return false;
}

void setNames() {
    QCoreApplication::setApplicationName(QStringLiteral("strata"));
    QCoreApplication::setOrganizationName(QStringLiteral("strata"));
    QCoreApplication::setApplicationVersion(QStringLiteral(STRATA_VERSION));
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (wantsTextOnly(argc, argv)) {
        QCoreApplication app(argc, argv);
        setNames();
        QCommandLineParser cli;
        describe(cli, o);
        cli.parse(QCoreApplication::arguments());
        if (cli.isSet(o.man)) {
            printMan(o);
            return 0;
        }
        cli.process(app);  // prints --help / --version and exits
        return 0;
    }

    QApplication app(argc, argv);
    setNames();
    QApplication::setDesktopFileName(QStringLiteral("io.github.strata.Strata"));
    QCommandLineParser cli;
    describe(cli, o);
    cli.process(app);

    strata::ui::MainWindow window;
    if (cli.isSet(o.device)) {
        bool ok = false;
        const int device = cli.value(o.device).toInt(&ok);
        if (!ok || device < 0) {
            std::fprintf(stderr, "strata: --device expects a device number (strata-cli devices lists them)\n");
            return 2;
        }
        window.setDevice(device, false);
    }
    if (cli.isSet(o.backend)) {
        const QString name = cli.value(o.backend);
        if (name != QLatin1String("cpu") && name != QLatin1String("vulkan")) {
            std::fprintf(stderr, "strata: --backend expects cpu or vulkan, got '%s'\n", qPrintable(name));
            return 2;
        }
        window.setBackend(name, false);
    }
    if (cli.isSet(o.prompt)) window.runPrompt(cli.value(o.prompt));

    strata::ui::ScreenshotRun* run = nullptr;
    if (cli.isSet(o.shots)) {
        window.resize(1600, 1000);
        run = new strata::ui::ScreenshotRun(&window, cli.value(o.shots), &window);
        QObject::connect(run, &strata::ui::ScreenshotRun::finished, &app, [](int code) { QApplication::exit(code); });
    }
    window.show();
    const QStringList args = cli.positionalArguments();
    if (args.isEmpty())
        window.openDemo();
    else
        window.openPath(args.first());
    if (run) run->start();
    return app.exec();
}

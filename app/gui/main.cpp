// strata: the desktop explorer. `strata [MODEL] [--backend cpu|vulkan] [--prompt TEXT] [--screenshot-dir DIR]`
// With no MODEL, the demonstration model opens (written on first use from the cached Llama 3 tokenizer).
#include <QApplication>
#include <QCommandLineParser>

#include "explorer/main_window.hpp"
#include "explorer/screenshot_run.hpp"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("strata"));
    QApplication::setOrganizationName(QStringLiteral("strata"));
    QApplication::setApplicationVersion(QStringLiteral(STRATA_VERSION));

    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("Strata: look inside Llama 3, layer by layer."));
    cli.addHelpOption();
    cli.addVersionOption();
    cli.addPositionalArgument(QStringLiteral("model"), QStringLiteral("A Hugging Face or Meta folder, or a .gguf file"));
    const QCommandLineOption backend(QStringLiteral("backend"), QStringLiteral("cpu or vulkan (default cpu)"), QStringLiteral("name"),
                                     QStringLiteral("cpu"));
    const QCommandLineOption prompt(QStringLiteral("prompt"), QStringLiteral("The prompt to run first"), QStringLiteral("text"));
    const QCommandLineOption shots(QStringLiteral("screenshot-dir"),
                                   QStringLiteral("Save a 1600x1000 screenshot of every view into this folder, then exit"),
                                   QStringLiteral("dir"));
    cli.addOptions({backend, prompt, shots});
    cli.process(app);

    strata::ui::MainWindow window;
    window.setBackend(cli.value(backend));
    if (cli.isSet(prompt)) window.runPrompt(cli.value(prompt));

    strata::ui::ScreenshotRun* run = nullptr;
    if (cli.isSet(shots)) {
        window.resize(1600, 1000);
        run = new strata::ui::ScreenshotRun(&window, cli.value(shots), &window);
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

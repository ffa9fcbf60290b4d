#pragma once
// `strata --screenshot-dir DIR`: drives the window through every view once the model is open and the prompt has
// run, and saves each as DIR/NN-name.png (QWidget::grab of the whole window). Each step waits until its view
// has content (and the worker's answers have arrived) before grabbing; the application exits when done.
#include <functional>
#include <vector>

#include <QElapsedTimer>
#include <QObject>
#include <QString>

namespace strata::ui {

class MainWindow;

class ScreenshotRun : public QObject {
    Q_OBJECT
public:
    ScreenshotRun(MainWindow* window, const QString& dir, QObject* parent = nullptr);
    // Starts once the window's first run and logit lens are in.
    void start();

signals:
    void finished(int exitCode);

private:
    struct Shot {
        QString name;
        std::function<void()> setup;
        std::function<bool()> ready;
    };
    void next();
    void poll();

    MainWindow* window_;
    QString dir_;
    std::vector<Shot> shots_;
    size_t index_ = 0;
    QElapsedTimer waited_;
    bool runDone_ = false, lensDone_ = false, started_ = false;
};

}  // namespace strata::ui

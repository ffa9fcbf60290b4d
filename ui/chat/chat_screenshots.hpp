#pragma once
// The chat's and the logits explorer's steps of `strata --screenshot-dir` (explorer/screenshot_run.cpp runs them
// after the explorer's own): a conversation with the demonstration model, a second turn with a token marked, that
// token opened in the logits explorer, and the logit lens there. Each setup starts something; ready() says when
// the window shows it.
#include <functional>
#include <vector>

#include <QString>

namespace strata::ui {

class MainWindow;

struct ChatShot {
    QString name;
    std::function<void()> setup;
    std::function<bool()> ready;
};

std::vector<ChatShot> chatScreenshots(MainWindow* window);

}  // namespace strata::ui

#pragma once
// Puts the chat and the logits explorer into Strata's main window: the window's content becomes the "Explorer"
// tab and the chat the "Chat" tab of one tab bar; the logits explorer and the logit lens join the explorer's
// views; a Chat menu; and a click on a generated token runs the conversation up to that token in the explorer
// and selects the step that chose it.
namespace strata::ui {

class MainWindow;

void installChat(MainWindow* window);

}  // namespace strata::ui

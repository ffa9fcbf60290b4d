#pragma once
// The prompt's tokens as chips (text over id) in a horizontally scrolling strip. Clicking a chip selects that
// position; the selected chip is highlighted and scrolled into view.
#include <vector>

#include <QScrollArea>

class QHBoxLayout;
class QToolButton;

namespace strata::ui {

class TokenChips : public QScrollArea {
    Q_OBJECT
public:
    explicit TokenChips(QWidget* parent = nullptr);
    void setTokens(const QStringList& texts, const std::vector<int32_t>& ids);
    void setSelected(int position);
    int count() const { return int(chips_.size()); }
    QToolButton* chip(int i) const { return chips_[size_t(i)]; }

signals:
    void chipClicked(int position);

private:
    QWidget* strip_;
    QHBoxLayout* layout_;
    std::vector<QToolButton*> chips_;
};

}  // namespace strata::ui

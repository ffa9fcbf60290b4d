#include "cards/card_panel.hpp"

#include <QComboBox>
#include <QDesktopServices>
#include <QFontDatabase>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

#include "cards/source_highlighter.hpp"

namespace strata::ui {

namespace {
constexpr int kContextLines = 2;  // shown around the cited range
}

CardPanel::CardPanel(QWidget* parent) : QWidget(parent) {
    browser_ = new QTextBrowser;
    browser_->setOpenLinks(false);
    browser_->document()->setDocumentMargin(8);

    auto* sourceBox = new QWidget;
    auto* sl = new QVBoxLayout(sourceBox);
    sl->setContentsMargins(0, 0, 0, 0);
    sl->setSpacing(2);
    sources_ = new QComboBox;
    sources_->setToolTip(tr("The Strata source lines that computed this tensor (embedded at build time)"));
    sourceStatus_ = new QLabel;
    sourceStatus_->setWordWrap(true);
    code_ = new QPlainTextEdit;
    code_->setReadOnly(true);
    code_->setLineWrapMode(QPlainTextEdit::NoWrap);
    code_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    new SourceHighlighter(code_->document());
    sl->addWidget(sources_);
    sl->addWidget(sourceStatus_);
    sl->addWidget(code_, 1);

    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(browser_);
    split->addWidget(sourceBox);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split);

    connect(sources_, &QComboBox::currentIndexChanged, this, &CardPanel::showSource);
    connect(browser_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == QLatin1String("source"))
            sources_->setCurrentIndex(url.path().toInt());
        else
            QDesktopServices::openUrl(url);
    });
}

void CardPanel::showCard(const QString& id, const CardContext& context) {
    cardId_ = id;
    card_ = CardLibrary::instance().find(id);
    const QSignalBlocker block(sources_);
    sources_->clear();
    if (!card_) {
        browser_->setHtml(id.isEmpty() ? tr("<p>Select a part of the model.</p>")
                                       : tr("<p>No card <code>%1</code> in resources/cards.</p>").arg(id.toHtmlEscaped()));
        code_->clear();
        sourceStatus_->clear();
        return;
    }
    browser_->setHtml(renderCardHtml(*card_, context));
    for (const CardSource& s : card_->computedBy)
        sources_->addItem(QStringLiteral("%1 %2\u2013%3 (%4)").arg(s.file).arg(s.first).arg(s.last).arg(s.role));
    showSource(0);
}

QString CardPanel::html() const { return browser_->toHtml(); }

QString CardPanel::sourceText() const { return code_->toPlainText(); }

void CardPanel::showSource(int index) {
    if (!card_ || index < 0 || index >= int(card_->computedBy.size())) {
        code_->clear();
        return;
    }
    if (sources_->currentIndex() != index) {
        const QSignalBlocker block(sources_);
        sources_->setCurrentIndex(index);
    }
    const CardSource& s = card_->computedBy[size_t(index)];
    const QStringList lines = embeddedSourceLines(s.file);
    const QString problem = checkCitation(s, lines);
    sourceStatus_->setText(problem.isEmpty() ? tr("<span style='color:%2'>anchor <code>%1</code> found in the cited lines</span>")
                                                   .arg(s.anchor.toHtmlEscaped(), palette().color(QPalette::PlaceholderText).name())
                                             : tr("<span style='color:#b00'>%1</span>").arg(problem.toHtmlEscaped()));
    QStringList out;
    const int first = std::max(1, s.first - kContextLines);
    const int last = std::min(int(lines.size()), s.last + kContextLines);
    const int width = int(QString::number(last).size());
    for (int n = first; n <= last; ++n) {
        const bool cited = n >= s.first && n <= s.last;
        out << QStringLiteral("%1%2 \u2502 %3").arg(cited ? QStringLiteral("\u25b6") : QStringLiteral(" ")).arg(n, width).arg(lines[n - 1]);
    }
    code_->setPlainText(out.join(QLatin1Char('\n')));
}

}  // namespace strata::ui

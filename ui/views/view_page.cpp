#include "views/view_page.hpp"

#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QPixmap>
#include <QToolButton>
#include <QVBoxLayout>

#include "strata/npy.hpp"

namespace strata::ui {

ViewPage::ViewPage(const QString& title, ExplorerState* state, EngineClient* client, QWidget* parent)
    : QWidget(parent), state_(state), client_(client), title_(title) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 4);
    layout->setSpacing(4);

    auto* header = new QHBoxLayout;
    auto* heading = new QLabel(QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()));
    header->addWidget(heading);
    controls_ = new QHBoxLayout;
    controls_->setSpacing(6);
    header->addSpacing(12);
    header->addLayout(controls_, 1);
    auto* png = new QToolButton;
    png->setText(tr("PNG\u2026"));
    png->setToolTip(tr("Save this view as a PNG image"));
    auto* npy = new QToolButton;
    npy->setText(tr(".npy\u2026"));
    npy->setToolTip(tr("Save the tensor shown here as a NumPy .npy file (float32, full precision)"));
    header->addWidget(png);
    header->addWidget(npy);
    layout->addLayout(header);

    readout_ = new QLabel;
    readout_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    readout_->setMinimumHeight(readout_->fontMetrics().height() + 4);
    layout->addWidget(readout_);

    connect(png, &QToolButton::clicked, this, &ViewPage::askPng);
    connect(npy, &QToolButton::clicked, this, &ViewPage::askNpy);
}

void ViewPage::setCanvas(QWidget* canvas) {
    canvas_ = canvas;
    auto* layout = static_cast<QVBoxLayout*>(this->layout());
    layout->insertWidget(1, canvas, 1);
}

void ViewPage::setReadout(const QString& text) { readout_->setText(text); }

QString ViewPage::readout() const { return readout_->text(); }

bool ViewPage::savePng(const QString& file) { return grab().save(file, "PNG"); }

void ViewPage::exportNpy(const QString& file) {
    const TensorExport t = tensorExport();
    if (t.data.empty()) {
        emit message(tr("Nothing to export here yet."));
        return;
    }
    try {
        write_npy(file.toStdString(), t.data, t.shape);
        emit message(tr("Wrote %1 to %2").arg(t.name, file));
    } catch (const std::exception& e) {
        emit message(tr("Could not write %1: %2").arg(file, QString::fromUtf8(e.what())));
    }
}

void ViewPage::askPng() {
    const QString file = QFileDialog::getSaveFileName(this, tr("Save view as PNG"), QDir::home().filePath(title_ + ".png"),
                                                      tr("PNG images (*.png)"));
    if (file.isEmpty()) return;
    emit message(savePng(file) ? tr("Saved %1").arg(file) : tr("Could not save %1").arg(file));
}

void ViewPage::askNpy() {
    QString name = tensorExport().name;
    if (name.isEmpty()) name = title_;
    const QString file = QFileDialog::getSaveFileName(this, tr("Save tensor as .npy"), QDir::home().filePath(name + ".npy"),
                                                      tr("NumPy arrays (*.npy)"));
    if (!file.isEmpty()) exportNpy(file);
}

}  // namespace strata::ui

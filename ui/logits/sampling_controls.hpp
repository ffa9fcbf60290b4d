#pragma once
// Temperature, top-k, top-p and min-p as spin boxes, each with its "off" value named: the chat's settings and the
// logits explorer's live controls are the same widget, so a person learns one set of knobs.
#include <QWidget>

#include "strata/generate.hpp"

class QDoubleSpinBox;
class QSpinBox;

namespace strata::ui {

class SamplingControls : public QWidget {
    Q_OBJECT
public:
    // Horizontal: one row of "label spin" pairs (the explorer's title row); vertical: a form (the chat).
    explicit SamplingControls(Qt::Orientation orientation, QWidget* parent = nullptr);

    // temperature, top_k, top_p, min_p (the seed is the chat's, not shown here).
    SamplerSettings settings() const;
    void setSettings(const SamplerSettings& s);  // emits changed once when anything differs

    QDoubleSpinBox* temperature() const { return temperature_; }
    QSpinBox* topK() const { return topK_; }
    QDoubleSpinBox* topP() const { return topP_; }
    QDoubleSpinBox* minP() const { return minP_; }

signals:
    void changed(const strata::SamplerSettings& settings);

private:
    QDoubleSpinBox* temperature_;
    QSpinBox* topK_;
    QDoubleSpinBox* topP_;
    QDoubleSpinBox* minP_;
    bool setting_ = false;
};

}  // namespace strata::ui

// The logits explorer's distribution and its table, on hand-made distributions whose every number is known:
// ranks, probabilities, cumulative mass, entropy, and what temperature, top-k, top-p and min-p leave.
#include <cmath>
#include <vector>

#include <QSignalSpy>
#include <QSpinBox>

#include "catch.hpp"
#include "logits/distribution.hpp"
#include "logits/sampling_controls.hpp"
#include "logits/token_table_model.hpp"
#include "ui_support.hpp"

using namespace strata;
using namespace strata::ui;

namespace {

// p = 0.2, 0.1, 0.05, 0.5, 0.15 for ids 0..4: by rank the ids are 3, 0, 4, 1, 2.
std::vector<float> handMade() {
    const double p[] = {0.2, 0.1, 0.05, 0.5, 0.15};
    std::vector<float> logits;
    for (double x : p) logits.push_back(float(std::log(x)));
    return logits;
}

const int32_t kByRank[] = {3, 0, 4, 1, 2};

VocabularyPtr handVocab() {
    auto v = std::make_shared<Vocabulary>();
    for (const char* t : {"the", " the", "The", "cat", "#"}) {
        v->text.push_back(QString::fromUtf8(t));
        v->display.push_back(QString::fromUtf8(t));
        v->special.push_back(false);
    }
    return v;
}

double sampled(const TokenTableModel& m, int row) {
    return m.data(m.index(row, TokenTableModel::SampledColumn), Qt::UserRole).toDouble();
}

SamplerSettings settings(float t, int64_t k, float p, float minP) { return SamplerSettings{t, k, p, minP, 0}; }

}  // namespace

TEST_CASE("the distribution ranks tokens and gives their probability, cumulative mass and entropy", "[logits]") {
    LogitsDistribution d(handMade());
    REQUIRE(d.size() == 5);
    for (int r = 0; r < 5; ++r) {
        CHECK(d.idAt(r) == kByRank[r]);
        CHECK(d.rankOf(kByRank[r]) == r);
    }
    CHECK(d.prob(3) == Approx(0.5).epsilon(1e-6));
    CHECK(d.prob(2) == Approx(0.05).epsilon(1e-6));
    const double cum[] = {0.5, 0.7, 0.85, 0.95, 1.0};
    for (int r = 0; r < 5; ++r) CHECK(d.cumulative(r) == Approx(cum[r]).epsilon(1e-6));
    CHECK(d.entropy() == Approx(1.333074293476779).epsilon(1e-6));
    CHECK(d.perplexity() == Approx(3.792685310765617).epsilon(1e-6));
    // Temperature 1 and nothing else: every token survives with its own probability.
    CHECK(d.survivors() == 5);
    CHECK(d.sampledProb(4) == Approx(0.15).epsilon(1e-6));
}

TEST_CASE("the sampling settings give the exact distribution the sampler draws from, as the table shows it", "[logits]") {
    LogitsDistribution d(handMade());
    TokenTableModel model;
    model.setRows(&d, handVocab(), {3, 0, 4, 1, 2}, 0);

    struct Case {
        const char* name;
        SamplerSettings s;
        double expected[5];  // by rank
    };
    const Case cases[] = {
        {"top-p 0.8 keeps the smallest set reaching 0.8", settings(1, 0, 0.8f, 0), {0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0}},
        {"top-k 2", settings(1, 2, 1, 0), {0.5 / 0.7, 0.2 / 0.7, 0, 0, 0}},
        {"min-p 0.25 drops what is below a quarter of the best", settings(1, 0, 1, 0.25f), {0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0}},
        {"temperature 2 flattens (p to the 1/2)", settings(2, 0, 1, 0),
         {0.3397178258355988, 0.21485641828017724, 0.18607111639676874, 0.1519264303473666, 0.10742820914008862}},
        {"temperature 0.5 sharpens (p squared)", settings(0.5f, 0, 1, 0),
         {0.769230769230769, 0.12307692307692307, 0.06923076923076922, 0.030769230769230767, 0.007692307692307692}},
        {"temperature 0 is greedy", settings(0, 0, 1, 0), {1, 0, 0, 0, 0}},
        {"temperature 2, top-k 3, then top-p 0.7 over what is left", settings(2, 3, 0.7f, 0),
         {0.6125741132772069, 0.3874258867227931, 0, 0, 0}},
    };
    for (const Case& c : cases) {
        SECTION(c.name) {
            d.setSampling(c.s);
            model.refresh();
            int survivors = 0;
            double mass = 0, entropy = 0;
            for (int r = 0; r < 5; ++r) {
                INFO("rank " << r + 1);
                CHECK(sampled(model, r) == Approx(c.expected[r]).margin(1e-6));
                const bool kept = c.expected[r] > 0;
                CHECK(d.survives(kByRank[r]) == kept);
                const QString shown = model.data(model.index(r, TokenTableModel::SampledColumn)).toString();
                CHECK((shown == QStringLiteral("\u2717")) == !kept);
                if (kept) {
                    ++survivors;
                    mass += d.prob(kByRank[r]);
                    entropy -= c.expected[r] * std::log(c.expected[r]);
                }
            }
            CHECK(d.survivors() == survivors);
            CHECK(d.survivingMass() == Approx(mass).epsilon(1e-6));
            CHECK(d.sampledEntropy() == Approx(entropy).margin(1e-6));
            // The model's own columns do not move with the settings.
            CHECK(model.data(model.index(0, TokenTableModel::ProbColumn), Qt::UserRole).toDouble() == Approx(0.5).epsilon(1e-6));
            CHECK(model.data(model.index(2, TokenTableModel::CumulativeColumn), Qt::UserRole).toDouble() == Approx(0.85).epsilon(1e-6));
        }
    }
}

TEST_CASE("the token table shows rank, token, id, logit and marks the text's next token", "[logits]") {
    LogitsDistribution d(handMade());
    TokenTableModel model;
    model.setRows(&d, handVocab(), {3, 0, 4}, 0);
    REQUIRE(model.rowCount() == 3);
    REQUIRE(model.columnCount() == TokenTableModel::ColumnCount);
    CHECK(model.data(model.index(0, TokenTableModel::RankColumn)).toLongLong() == 1);
    CHECK(model.data(model.index(0, TokenTableModel::TokenColumn)).toString() == QStringLiteral("cat"));
    CHECK(model.data(model.index(1, TokenTableModel::IdColumn)).toInt() == 0);
    CHECK(model.data(model.index(1, TokenTableModel::LogitColumn), Qt::UserRole).toDouble() == Approx(std::log(0.2)).epsilon(1e-6));
    CHECK(model.data(model.index(0, TokenTableModel::ProbColumn)).toString() == QStringLiteral("50.0 %"));
    // Id 0 is the highlighted one (row 1), the others are not.
    CHECK(model.data(model.index(1, TokenTableModel::TokenColumn), Qt::BackgroundRole).isValid());
    CHECK_FALSE(model.data(model.index(0, TokenTableModel::TokenColumn), Qt::BackgroundRole).isValid());
    // Removed tokens are greyed.
    d.setSampling(settings(1, 1, 1, 0));
    model.refresh();
    CHECK_FALSE(model.data(model.index(0, TokenTableModel::TokenColumn), Qt::ForegroundRole).isValid());
    CHECK(model.data(model.index(1, TokenTableModel::TokenColumn), Qt::ForegroundRole).isValid());
}

TEST_CASE("any token can be found by id or by text, most likely first", "[logits]") {
    LogitsDistribution d(handMade());
    const VocabularyPtr vocab = handVocab();
    CHECK(d.find(QStringLiteral("3"), *vocab) == std::vector<int32_t>{3});
    CHECK(d.find(QStringLiteral("#2"), *vocab) == std::vector<int32_t>{2});
    // "the": the exact text first, then with a leading space, then tokens containing it (case-insensitive).
    CHECK(d.find(QStringLiteral("the"), *vocab) == std::vector<int32_t>{0, 1, 2});
    CHECK(d.find(QStringLiteral("ca"), *vocab) == std::vector<int32_t>{3});
    CHECK(d.find(QStringLiteral("dog"), *vocab).empty());
    CHECK(d.find(QStringLiteral("the"), *vocab, 2).size() == 2);
    CHECK(d.find(QStringLiteral("99"), *vocab).empty());  // not an id of this vocabulary, and no text has it
}

TEST_CASE("the sampling controls hold the four settings and report each change once", "[logits]") {
    test::ui_app();
    SamplingControls c(Qt::Horizontal);
    QSignalSpy changed(&c, &SamplingControls::changed);
    c.setSettings(settings(0.8f, 40, 0.95f, 0.05f));
    CHECK(changed.count() == 1);
    const SamplerSettings s = c.settings();
    CHECK(s.temperature == Approx(0.8f));
    CHECK(s.top_k == 40);
    CHECK(s.top_p == Approx(0.95f));
    CHECK(s.min_p == Approx(0.05f));
    c.setSettings(s);
    CHECK(changed.count() == 1);  // nothing differed
    c.topK()->setValue(0);
    CHECK(changed.count() == 2);
    CHECK(c.topK()->text() == QStringLiteral("off"));
}

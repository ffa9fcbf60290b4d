// The sampler's filters on hand-made distributions with exact expected values, and its reproducibility.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "catch.hpp"
#include "strata/generate.hpp"

using namespace strata;

namespace {

// Logits whose softmax is exactly `p` (up to rounding).
std::vector<float> logits_of(const std::vector<double>& p) {
    std::vector<float> l;
    for (double x : p) l.push_back(x > 0 ? static_cast<float>(std::log(x)) : -INFINITY);
    return l;
}

void check_dist(const std::vector<float>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        INFO("id " << i);
        if (want[i] == 0.0)
            CHECK(got[i] == 0.0f);
        else
            CHECK(got[i] == Approx(want[i]).epsilon(1e-5));
    }
}

SamplerSettings settings(float temperature, int64_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f) {
    SamplerSettings s;
    s.temperature = temperature;
    s.top_k = top_k;
    s.top_p = top_p;
    s.min_p = min_p;
    return s;
}

}  // namespace

TEST_CASE("temperature 0 is greedy with the lowest id on ties", "[sampling]") {
    const std::vector<float> l{1.0f, 3.0f, 3.0f, 2.0f, NAN};
    check_dist(sampling_distribution(l, settings(0)), {0, 1, 0, 0, 0});
    Sampler s(settings(0));
    CHECK(s.sample(l) == 1);
}

TEST_CASE("temperature scales the logits before the softmax", "[sampling]") {
    const auto l = logits_of({0.1, 0.2, 0.3, 0.4});
    check_dist(sampling_distribution(l, settings(1)), {0.1, 0.2, 0.3, 0.4});
    // T = 0.5 squares the probabilities: p^2 / sum(p^2)
    check_dist(sampling_distribution(l, settings(0.5f)), {0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3});
}

TEST_CASE("top-k keeps exactly k tokens, ties to the lower id", "[sampling]") {
    check_dist(sampling_distribution(logits_of({0.1, 0.2, 0.3, 0.4}), settings(1, 2)), {0, 0, 3.0 / 7, 4.0 / 7});
    const std::vector<float> ties{1.0f, 1.0f, 1.0f, 0.0f};
    check_dist(sampling_distribution(ties, settings(1, 2)), {0.5, 0.5, 0, 0});
    // k at or past the vocabulary is off
    check_dist(sampling_distribution(logits_of({0.25, 0.75}), settings(1, 5)), {0.25, 0.75});
}

TEST_CASE("top-p keeps the smallest most-probable set reaching p", "[sampling]") {
    const auto l = logits_of({0.2, 0.4, 0.1, 0.3});
    check_dist(sampling_distribution(l, settings(1, 0, 0.7f)), {0, 4.0 / 7, 0, 3.0 / 7});     // 0.4 + 0.3 reaches 0.7
    check_dist(sampling_distribution(l, settings(1, 0, 0.75f)), {2.0 / 9, 4.0 / 9, 0, 3.0 / 9});  // needs the 0.2 too
    check_dist(sampling_distribution(l, settings(1, 0, 0.05f)), {0, 1, 0, 0});               // at least one token
}

TEST_CASE("min-p drops tokens below min_p times the top probability", "[sampling]") {
    const auto l = logits_of({0.15, 0.5, 0.1, 0.25});
    // threshold 0.3 * 0.5 = 0.15: 0.15 stays (not below), 0.1 goes
    check_dist(sampling_distribution(l, settings(1, 0, 1, 0.3f)), {0.15 / 0.9, 0.5 / 0.9, 0, 0.25 / 0.9});
    check_dist(sampling_distribution(l, settings(1, 0, 1, 0.31f)), {0, 0.5 / 0.75, 0, 0.25 / 0.75});
}

TEST_CASE("filters apply in the order temperature, top-k, top-p, min-p", "[sampling]") {
    const auto l = logits_of({0.08, 0.35, 0.12, 0.25, 0.2});
    // top-k 3: {0.35, 0.25, 0.2} / 0.8 = {0.4375, 0.3125, 0.25}
    check_dist(sampling_distribution(l, settings(1, 3)), {0, 0.4375, 0, 0.3125, 0.25});
    // then top-p 0.7 over the renormalised top-k: 0.4375 + 0.3125 = 0.75 reaches it
    check_dist(sampling_distribution(l, settings(1, 3, 0.7f)), {0, 0.4375 / 0.75, 0, 0.3125 / 0.75, 0});
    // then min-p 0.8 over what top-p kept: 0.4167 < 0.8 * 0.5833
    check_dist(sampling_distribution(l, settings(1, 3, 0.7f, 0.8f)), {0, 1, 0, 0, 0});
    // On the raw distribution top-p 0.7 would have kept three tokens (0.35 + 0.25 < 0.7): order matters.
    check_dist(sampling_distribution(l, settings(1, 0, 0.7f)), {0, 0.35 / 0.8, 0, 0.25 / 0.8, 0.2 / 0.8});
}

TEST_CASE("the sampler is reproducible with a seed and follows the distribution", "[sampling]") {
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0, 2);
    std::vector<float> l(1000);
    for (auto& x : l) x = d(rng);
    auto draw = [&](uint64_t seed, int n, SamplerSettings s) {
        s.seed = seed;
        Sampler sampler(s);
        std::vector<int32_t> ids;
        for (int i = 0; i < n; ++i) ids.push_back(sampler.sample(l));
        return ids;
    };
    const auto s = settings(0.9f, 50, 0.95f, 0.02f);
    CHECK(draw(7, 200, s) == draw(7, 200, s));
    CHECK(draw(7, 200, s) != draw(8, 200, s));

    // Only tokens the filters keep are drawn, at about their probabilities.
    const auto dist = sampling_distribution(l, s);
    const int n = 20000;
    std::map<int32_t, int> counts;
    for (int32_t id : draw(11, n, s)) counts[id]++;
    for (const auto& [id, count] : counts) {
        INFO("id " << id);
        CHECK(dist[size_t(id)] > 0.0f);
        const double p = dist[size_t(id)];
        CHECK(std::abs(double(count) / n - p) < 5 * std::sqrt(p * (1 - p) / n) + 1e-3);
    }
}

TEST_CASE("top-p on a large distribution keeps exactly the brute-force set", "[sampling]") {
    std::mt19937 rng(17);
    std::normal_distribution<float> d(0, 3);
    std::vector<float> l(20000);
    for (auto& x : l) x = d(rng);
    for (float top_p : {0.5f, 0.9f, 0.999f}) {
        // Independent: softmax in double, sort everything by (p desc, id asc), take the prefix reaching top_p.
        std::vector<double> p(l.size());
        double mx = *std::max_element(l.begin(), l.end()), sum = 0;
        for (size_t i = 0; i < l.size(); ++i) sum += (p[i] = std::exp(double(l[i]) - mx));
        for (auto& x : p) x /= sum;
        std::vector<int32_t> order(l.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] != p[size_t(b)] ? p[size_t(a)] > p[size_t(b)] : a < b; });
        size_t n = 0;
        double cum = 0;
        while (n < order.size() && cum < top_p) cum += p[size_t(order[n++])];
        std::vector<int32_t> want(order.begin(), order.begin() + long(n));
        std::sort(want.begin(), want.end());

        const auto dist = sampling_distribution(l, settings(1, 0, top_p));
        std::vector<int32_t> got;
        for (size_t i = 0; i < dist.size(); ++i)
            if (dist[i] > 0) got.push_back(int32_t(i));
        INFO("top_p " << top_p << ": " << want.size() << " tokens");
        CHECK(got == want);
    }
}

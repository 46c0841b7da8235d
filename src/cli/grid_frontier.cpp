#include "cli/grid_frontier.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cli/plot_helper.h"
#include "eval/paired_stats.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Trailing "-N" of a name: N, else 0; `stem` gets the name without it.
int trailing_bits(const std::string& name, std::string* stem) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  if (i < name.size() && i > 1 && name[i - 1] == '-' && name.size() - i <= 2) {
    if (stem) *stem = name.substr(0, i - 1);
    return std::stoi(name.substr(i));
  }
  if (stem) *stem = name;
  return 0;
}

std::string pct(double x) {
  return fmt::format("{:.1f}", 100.0 * x);
}

std::string with_interval(double v, const eval::Interval& iv) {
  return fmt::format("{} [{}, {}]", pct(v), pct(iv.lo), pct(iv.hi));
}

// Everything the report needs per cell, aligned to its task's common problems.
struct Aligned {
  size_t universe = 0;
  std::vector<double> x;  // 0/1 per problem of the universe
  double acc = 0;
};

struct Setting {
  std::string key, model, cache, task;
  std::vector<size_t> cells;
};

}  // namespace

std::string kv_method_family(const std::string& name) {
  if (const size_t at = name.find('@'); at != std::string::npos) return name.substr(0, at);
  std::string stem;
  trailing_bits(name, &stem);
  return stem;
}

int kv_nominal_bits(const std::string& name, const json& bundle) {
  if (bundle.is_object() && bundle.contains("kv-bits") && bundle["kv-bits"].is_number_integer())
    return bundle["kv-bits"].get<int>();
  return trailing_bits(name, nullptr);
}

json cells_to_json(const std::vector<FrontierCell>& cells) {
  json a = json::array();
  for (const auto& c : cells) {
    std::vector<int> correct(c.correct.begin(), c.correct.end());
    a.push_back({{"model", c.model},
                 {"cache", c.cache},
                 {"task", c.task},
                 {"name", c.name},
                 {"family", c.family},
                 {"nominal_bits", c.nominal_bits},
                 {"quantized", c.quantized},
                 {"paper", c.paper},
                 {"eff_bits", c.eff_bits},
                 {"eff_bits_k", c.eff_bits_k},
                 {"eff_bits_v", c.eff_bits_v},
                 {"ids", c.ids},
                 {"correct", correct}});
  }
  return {{"format", "dllmq-grid-cells"}, {"version", 1}, {"cells", a}};
}

std::vector<FrontierCell> cells_from_json(const json& j, const std::string& path) {
  if (!j.is_object() || j.value("format", "") != "dllmq-grid-cells" || !j.contains("cells") ||
      !j["cells"].is_array())
    fail("{}: not a grid cells file (format \"dllmq-grid-cells\" with a \"cells\" array)", path);
  std::vector<FrontierCell> out;
  for (size_t i = 0; i < j["cells"].size(); ++i) {
    const json& e = j["cells"][i];
    const auto bad = [&](const char* key, const char* what) {
      fail("{}: cells[{}].{} must be {}", path, i, key, what);
    };
    if (!e.is_object()) fail("{}: cells[{}] must be an object", path, i);
    FrontierCell c;
    const std::pair<const char*, std::string*> strings[] = {{"model", &c.model},
                                                            {"cache", &c.cache},
                                                            {"task", &c.task},
                                                            {"name", &c.name},
                                                            {"family", &c.family}};
    for (auto [key, dst] : strings) {
      if (!e.contains(key) || !e[key].is_string()) bad(key, "a string");
      *dst = e[key].get<std::string>();
    }
    const std::pair<const char*, double*> numbers[] = {
        {"eff_bits", &c.eff_bits}, {"eff_bits_k", &c.eff_bits_k}, {"eff_bits_v", &c.eff_bits_v}};
    for (auto [key, dst] : numbers) {
      if (!e.contains(key) || !e[key].is_number() || !std::isfinite(e[key].get<double>()) ||
          e[key].get<double>() < 0)
        bad(key, "a non-negative number");
      *dst = e[key].get<double>();
    }
    if (!e.contains("nominal_bits") || !e["nominal_bits"].is_number_integer())
      bad("nominal_bits", "an integer");
    c.nominal_bits = e["nominal_bits"].get<int>();
    const std::pair<const char*, bool*> flags[] = {{"quantized", &c.quantized},
                                                   {"paper", &c.paper}};
    for (auto [key, dst] : flags) {
      if (!e.contains(key) || !e[key].is_boolean()) bad(key, "true or false");
      *dst = e[key].get<bool>();
    }
    if (!e.contains("ids") || !e["ids"].is_array()) bad("ids", "an array of strings");
    if (!e.contains("correct") || !e["correct"].is_array() ||
        e["correct"].size() != e["ids"].size())
      bad("correct", "an array of 0/1 as long as ids");
    for (size_t k = 0; k < e["ids"].size(); ++k) {
      if (!e["ids"][k].is_string()) bad("ids", "an array of strings");
      const json& v = e["correct"][k];
      if (!(v.is_boolean() || (v.is_number_integer() && (v == 0 || v == 1))))
        bad("correct", "an array of 0/1 (or booleans)");
      c.ids.push_back(e["ids"][k].get<std::string>());
      c.correct.push_back(v.is_boolean() ? uint8_t(v.get<bool>()) : uint8_t(v.get<int>()));
    }
    out.push_back(std::move(c));
  }
  return out;
}

FrontierReport reduce_frontier(const std::vector<FrontierCell>& cells, const FrontierOptions& o) {
  FrontierReport r;
  std::string& md = r.markdown;
  json& js = r.json;
  if (cells.empty()) {
    md = "\nNo cells with per-problem results: no frontier.\n";
    return r;
  }
  // Universes: per task, the problems every cell of the task answered (pairing needs them).
  std::vector<std::string> tasks;
  for (const auto& c : cells)
    if (std::find(tasks.begin(), tasks.end(), c.task) == tasks.end()) tasks.push_back(c.task);
  std::vector<std::vector<std::string>> universe(tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t) {
    std::set<std::string> common;
    bool first = true;
    for (const auto& c : cells) {
      if (c.task != tasks[t]) continue;
      std::set<std::string> mine(c.ids.begin(), c.ids.end());
      if (first) {
        common = std::move(mine), first = false;
      } else {
        std::set<std::string> keep;
        std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                              std::inserter(keep, keep.begin()));
        common = std::move(keep);
      }
    }
    if (common.empty())
      fail("grid frontier: the cells of task {} share no problem; nothing to compare", tasks[t]);
    universe[t].assign(common.begin(), common.end());
  }
  std::vector<Aligned> al(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& c = cells[i];
    const size_t t = size_t(std::find(tasks.begin(), tasks.end(), c.task) - tasks.begin());
    std::map<std::string, uint8_t> by_id;
    for (size_t k = 0; k < c.ids.size(); ++k) by_id[c.ids[k]] = c.correct[k];
    al[i].universe = t;
    for (const auto& id : universe[t]) al[i].x.push_back(by_id.at(id));
    double s = 0;
    for (double v : al[i].x) s += v;
    al[i].acc = s / double(al[i].x.size());
  }
  // One bootstrap for everything: replicate accuracies of every cell on the same draws.
  std::vector<size_t> sizes;
  for (const auto& u : universe) sizes.push_back(u.size());
  std::vector<std::vector<double>> rep(cells.size(), std::vector<double>(o.replicates));
  eval::bootstrap_replicates(sizes, o.replicates, o.seed, [&](int b, const auto& counts) {
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto& cn = counts[al[i].universe];
      double s = 0;
      for (size_t k = 0; k < cn.size(); ++k) s += cn[k] * al[i].x[k];
      rep[i][b] = s / double(cn.size());
    }
  });
  const auto interval = [&](const std::vector<double>& v) { return eval::percentile_interval(v); };

  std::vector<Setting> settings;
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& c = cells[i];
    std::string key = c.model + ", cache " + c.cache + (tasks.size() > 1 ? ", " + c.task : "");
    auto it = std::find_if(settings.begin(), settings.end(),
                           [&](const Setting& s) { return s.key == key; });
    if (it == settings.end()) {
      settings.push_back({key, c.model, c.cache, c.task, {}});
      it = settings.end() - 1;
    }
    it->cells.push_back(i);
  }
  js["replicates"] = o.replicates;
  js["seed"] = o.seed;
  js["budgets"] = o.budgets;
  js["problems"] = json::object();
  for (size_t t = 0; t < tasks.size(); ++t) js["problems"][tasks[t]] = universe[t].size();
  js["settings"] = json::array();

  md += fmt::format(
      "\n## Accuracy at matched effective KV bits\n\n"
      "Accuracy (%) along each method's accuracy-vs-effective-bits frontier (upper-left Pareto\n"
      "front of its cells), linear between frontier cells, [95% bootstrap interval over problems,\n"
      "{} replicates, seed {}]; '-' = the method has no cell at or below that budget. Problems:",
      o.replicates, o.seed);
  for (size_t t = 0; t < tasks.size(); ++t)
    md += fmt::format("{} {} {}", t ? "," : "", tasks[t], universe[t].size());
  md += ".\n";
  for (const Setting& s : settings) {
    std::vector<std::string> fams;
    for (size_t i : s.cells)
      if (std::find(fams.begin(), fams.end(), cells[i].family) == fams.end())
        fams.push_back(cells[i].family);
    json sj = {{"setting", s.key}, {"model", s.model}, {"cache", s.cache}, {"task", s.task}};
    sj["series"] = json::array();
    // Frontier per family.
    std::map<std::string, std::vector<size_t>> front;  // family -> cell indices along it
    for (const auto& f : fams) {
      std::vector<size_t> mine;
      std::vector<double> xs, ys;
      for (size_t i : s.cells)
        if (cells[i].family == f)
          mine.push_back(i), xs.push_back(cells[i].eff_bits), ys.push_back(al[i].acc);
      std::vector<size_t> fi = eval::pareto_frontier(xs, ys);
      std::set<size_t> on;
      for (size_t k : fi) front[f].push_back(mine[k]), on.insert(mine[k]);
      json pts = json::array();
      for (size_t i : mine) {
        const auto iv = interval(rep[i]);
        pts.push_back({{"name", cells[i].name},
                       {"x", cells[i].eff_bits},
                       {"bits_k", cells[i].eff_bits_k},
                       {"bits_v", cells[i].eff_bits_v},
                       {"y", al[i].acc},
                       {"lo", iv.lo},
                       {"hi", iv.hi},
                       {"frontier", on.count(i) > 0}});
      }
      sj["series"].push_back({{"name", f}, {"points", pts}});
    }
    // Matched budgets: point estimate on the frontier, replicates through the same cells.
    md += fmt::format("\n### {}\n\n| method |", s.key);
    for (double b : o.budgets) md += fmt::format(" {:g} bits |", b);
    md += "\n|---|";
    for (size_t k = 0; k < o.budgets.size(); ++k) md += "---|";
    md += "\n";
    json matched = json::array();
    // per budget: (family, value, replicates) of quantized methods that reach it
    std::vector<std::vector<std::tuple<std::string, double, std::vector<double>>>> at(
        o.budgets.size());
    for (const auto& f : fams) {
      const auto& fr = front[f];
      std::vector<double> xs, ys;
      for (size_t i : fr) xs.push_back(cells[i].eff_bits), ys.push_back(al[i].acc);
      md += fmt::format("| {} |", f);
      json row = {{"method", f}, {"values", json::array()}};
      for (size_t k = 0; k < o.budgets.size(); ++k) {
        const auto v = eval::interpolate_frontier(xs, ys, o.budgets[k]);
        if (!v) {
          md += " - |";
          row["values"].push_back(nullptr);
          continue;
        }
        std::vector<double> rv(o.replicates);
        std::vector<double> ry(fr.size());
        for (int b = 0; b < o.replicates; ++b) {
          for (size_t q = 0; q < fr.size(); ++q) ry[q] = rep[fr[q]][b];
          rv[b] = *eval::interpolate_frontier(xs, ry, o.budgets[k]);
        }
        const auto iv = interval(rv);
        md += fmt::format(" {} |", with_interval(*v, iv));
        row["values"].push_back({{"acc", *v}, {"lo", iv.lo}, {"hi", iv.hi}});
        if (cells[fr.front()].quantized) at[k].emplace_back(f, *v, std::move(rv));
      }
      md += "\n";
      matched.push_back(row);
    }
    // The leader at each budget and its margin over the runner-up, paired.
    json leads = json::array();
    md += "\n";
    for (size_t k = 0; k < o.budgets.size(); ++k) {
      auto& v = at[k];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end(),
                [](const auto& a, const auto& b) { return std::get<1>(a) > std::get<1>(b); });
      json lead = {{"budget", o.budgets[k]}, {"best", std::get<0>(v[0])}};
      std::string line = fmt::format("- {:g} bits: best {} ({})", o.budgets[k], std::get<0>(v[0]),
                                     pct(std::get<1>(v[0])));
      if (v.size() > 1) {
        std::vector<double> d(o.replicates);
        for (int b = 0; b < o.replicates; ++b) d[b] = std::get<2>(v[0])[b] - std::get<2>(v[1])[b];
        const auto iv = interval(d);
        const double diff = std::get<1>(v[0]) - std::get<1>(v[1]);
        const bool sig = iv.lo > 0;
        if (diff == 0)  // a tie: name both, claim no lead
          line += fmt::format(", tied with {} (paired interval [{}, {}])", std::get<0>(v[1]),
                              pct(iv.lo), pct(iv.hi));
        else
          line +=
              fmt::format(", ahead of {} by {} points [{}, {}]: {}", std::get<0>(v[1]), pct(diff),
                          pct(iv.lo), pct(iv.hi), sig ? "significant" : "not significant");
        lead["second"] = std::get<0>(v[1]);
        lead["diff"] = diff;
        lead["lo"] = iv.lo;
        lead["hi"] = iv.hi;
        lead["significant"] = sig;
      }
      md += line + "\n";
      leads.push_back(lead);
    }
    // McNemar between frontier cells of different methods within `mcnemar_within` bits.
    json tests = json::array();
    std::string tmd;
    for (size_t a = 0; a < fams.size(); ++a)
      for (size_t b = a + 1; b < fams.size(); ++b)
        for (size_t i : front[fams[a]])
          for (size_t j : front[fams[b]]) {
            if (std::abs(cells[i].eff_bits - cells[j].eff_bits) > o.mcnemar_within) continue;
            int64_t n10 = 0, n01 = 0;
            for (size_t q = 0; q < al[i].x.size(); ++q) {
              n10 += al[i].x[q] > 0.5 && al[j].x[q] < 0.5;
              n01 += al[i].x[q] < 0.5 && al[j].x[q] > 0.5;
            }
            const double p = eval::mcnemar_exact_p(n10, n01);
            tmd += fmt::format("| {} ({:.2f} b, {}) | {} ({:.2f} b, {}) | {} | {} | {:.3g} |\n",
                               cells[i].name, cells[i].eff_bits, pct(al[i].acc), cells[j].name,
                               cells[j].eff_bits, pct(al[j].acc), n10, n01, p);
            tests.push_back({{"a", cells[i].name},
                             {"b", cells[j].name},
                             {"a_only", n10},
                             {"b_only", n01},
                             {"p", p}});
          }
    if (!tmd.empty())
      md += fmt::format(
                "\nMcNemar exact tests, frontier cells of two methods within {:g} bits:\n\n"
                "| A | B | A right, B wrong | A wrong, B right | p |\n|---|---|---|---|---|\n",
                o.mcnemar_within) +
            tmd;
    sj["matched"] = matched;
    sj["leads"] = leads;
    sj["mcnemar"] = tests;
    js["settings"].push_back(sj);
  }

  // The paper's form: per method the mean over settings x {4, 2} bits of its paper cells.
  std::vector<std::string> fams;
  for (const auto& c : cells)
    if (c.paper && std::find(fams.begin(), fams.end(), c.family) == fams.end())
      fams.push_back(c.family);
  md += fmt::format(
      "\n## Paper-form average\n\n"
      "Mean accuracy (%) of each method's default cells (names without '@') over {} setting(s) "
      "x {{4, 2}} bits (dense baselines: over the settings), [95% bootstrap interval].\n\n"
      "| method | cells | average | mean eff. bits |\n|---|---|---|---|\n",
      settings.size());
  struct Avg {
    std::string family;
    double v = 0;
    std::vector<double> rep;
    bool complete = false, quantized = false;
  };
  std::vector<Avg> avgs;
  json pj = json::array();
  for (const auto& f : fams) {
    std::vector<size_t> use;
    std::set<std::pair<std::string, int>> have;
    bool quantized = false;
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto& c = cells[i];
      if (!c.paper || c.family != f) continue;
      quantized |= c.quantized;
      if (c.quantized && c.nominal_bits != 4 && c.nominal_bits != 2) continue;
      const std::string sk = c.model + "|" + c.cache + "|" + c.task;
      if (!have.insert({sk, c.quantized ? c.nominal_bits : 0}).second) continue;  // first only
      use.push_back(i);
    }
    if (use.empty()) continue;
    const size_t want = settings.size() * (quantized ? 2 : 1);
    Avg a{f, 0, std::vector<double>(o.replicates, 0.0), use.size() == want, quantized};
    double bits = 0;
    for (size_t i : use) {
      a.v += al[i].acc / double(use.size());
      bits += cells[i].eff_bits / double(use.size());
      for (int b = 0; b < o.replicates; ++b) a.rep[b] += rep[i][b] / double(use.size());
    }
    const auto iv = interval(a.rep);
    md += fmt::format("| {} | {}{} | {} | {:.2f} |\n", f, use.size(),
                      a.complete ? "" : fmt::format(" of {} (incomplete)", want),
                      with_interval(a.v, iv), bits);
    pj.push_back({{"method", f},
                  {"cells", use.size()},
                  {"complete", a.complete},
                  {"quantized", quantized},
                  {"average", a.v},
                  {"lo", iv.lo},
                  {"hi", iv.hi},
                  {"mean_eff_bits", bits}});
    avgs.push_back(std::move(a));
  }
  js["paper_average"] = pj;
  std::vector<const Avg*> q;
  for (const auto& a : avgs)
    if (a.quantized && a.complete) q.push_back(&a);
  std::sort(q.begin(), q.end(), [](const Avg* a, const Avg* b) { return a->v > b->v; });
  if (q.empty()) {
    md += "\nNo quantized method has every setting at 4 and 2 bits: no best method named.\n";
  } else if (q.size() == 1) {
    md += fmt::format("\nBest quantized method: {} (the only complete one).\n", q[0]->family);
    js["best"] = {{"method", q[0]->family}};
  } else {
    std::vector<double> d(o.replicates);
    for (int b = 0; b < o.replicates; ++b) d[b] = q[0]->rep[b] - q[1]->rep[b];
    const auto iv = interval(d);
    const bool sig = iv.lo > 0;
    md += fmt::format(
        "\nBest quantized method: **{}**, {} points ahead of {} (paired 95% interval [{}, {}]): "
        "the lead is {}.\n",
        q[0]->family, pct(q[0]->v - q[1]->v), q[1]->family, pct(iv.lo), pct(iv.hi),
        sig ? "significant" : "NOT significant");
    js["best"] = {{"method", q[0]->family},
                  {"second", q[1]->family},
                  {"diff", q[0]->v - q[1]->v},
                  {"lo", iv.lo},
                  {"hi", iv.hi},
                  {"significant", sig}};
  }
  return r;
}

std::vector<std::string> draw_frontiers(const FrontierReport& r, const std::string& dir) {
  std::vector<std::string> out;
  if (!r.json.contains("settings")) return out;
  for (const auto& s : r.json["settings"]) {
    std::string name = "frontier-" + s["setting"].get<std::string>() + ".png";
    for (char& c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
        c = '_';
    json spec = {{"title", fmt::format("{}: accuracy vs effective KV bits",
                                       s["setting"].get<std::string>())},
                 {"xlabel", "effective bits per cached K/V element (all overheads)"},
                 {"ylabel", "accuracy (95% bootstrap interval)"},
                 {"series", s["series"]},
                 {"budgets", r.json["budgets"]}};
    try {
      draw_with_matplotlib("frontier.py", spec, (fs::path(dir) / name).string());
      out.push_back(name);
    } catch (const Error& e) {
      fmt::print(stderr, "grid: no frontier plot: {}\n", e.what());
    }
  }
  return out;
}

}  // namespace dllmq::cli

#include "convoy/report/plots.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "convoy/core/error.h"
#include "convoy/io/atomic_file.h"
#include "report/plot_ticks.h"

namespace convoy::report {
namespace {

struct Rgb {
  double r, g, b;
};
constexpr Rgb kBlack{0, 0, 0}, kGrey{0.85, 0.85, 0.85}, kBlue{0.12, 0.35, 0.80}, kOrange{0.90, 0.45, 0.10},
    kRed{0.85, 0.10, 0.10};

// A white canvas with the few drawing verbs the charts need.
class Canvas {
 public:
  Canvas(int width, int height)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height), cairo_surface_destroy),
        cr_(cairo_create(surface_.get()), cairo_destroy) {
    cairo_set_source_rgb(cr(), 1, 1, 1);
    cairo_paint(cr());
    cairo_select_font_face(cr(), "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  }
  cairo_t* cr() { return cr_.get(); }
  cairo_surface_t* surface() { return surface_.get(); }

  void color(Rgb c) { cairo_set_source_rgb(cr(), c.r, c.g, c.b); }
  void line(double x0, double y0, double x1, double y1, Rgb c, double width = 1) {
    color(c);
    cairo_set_line_width(cr(), width);
    cairo_move_to(cr(), x0, y0);
    cairo_line_to(cr(), x1, y1);
    cairo_stroke(cr());
  }
  // align: 0 left, 0.5 centre, 1 right; y is the baseline.
  void text(double x, double y, const std::string& s, double size, Rgb c, double align = 0, bool bold = false) {
    cairo_select_font_face(cr(), "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr(), size);
    cairo_text_extents_t ext;
    cairo_text_extents(cr(), s.c_str(), &ext);
    color(c);
    cairo_move_to(cr(), x - align * ext.x_advance, y);
    cairo_show_text(cr(), s.c_str());
  }

  double text_width(const std::string& s, double size, bool bold = false) {
    cairo_select_font_face(cr(), "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr(), size);
    cairo_text_extents_t ext;
    cairo_text_extents(cr(), s.c_str(), &ext);
    return ext.x_advance;
  }

  void save(const std::string& path) {
    cairo_surface_flush(surface());
    std::string bytes;
    const auto status = cairo_surface_write_to_png_stream(
        surface(),
        [](void* closure, const unsigned char* data, unsigned int length) {
          static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
          return CAIRO_STATUS_SUCCESS;
        },
        &bytes);
    if (status != CAIRO_STATUS_SUCCESS) throw UserError(path + ": cannot encode PNG (" + cairo_status_to_string(status) + ")");
    io::write_file_atomic(path, bytes);
  }

 private:
  std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)> surface_;
  std::unique_ptr<cairo_t, void (*)(cairo_t*)> cr_;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Series {
  std::string name;
  std::vector<double> y;
  Rgb color;
};

// One line chart in the box (x, y, w, h): title, then the legend in a row of
// its own (never over a line), then the plot with ticks on round values.
void line_panel(Canvas& c, double x, double y, double w, double h, const std::string& title,
                const std::vector<Series>& series, const std::vector<double>& xs, bool percent) {
  const double unit = percent ? 100 : 1;  // ticks fall on round values of what the labels show
  double lo = 1e300, hi = -1e300;
  for (const auto& s : series)
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v * unit), hi = std::max(hi, v * unit);
  const Ticks yt = nice_ticks(lo, hi, 6);
  const double ylo = yt.values.front(), yhi = yt.values.back();
  const double x0 = x + 60, x1 = x + w - 15, y0 = y + h - 45, y1 = y + 54;
  // The first and last markers (radius 3) sit this far inside the axes, whole.
  const double inset = 8;
  const double xmin = xs.front(), xmax = std::max(xs.back(), xs.front() + 1);
  auto px = [&](double v) { return x0 + inset + (v - xmin) / (xmax - xmin) * (x1 - x0 - 2 * inset); };
  auto py = [&](double v) { return y0 - (v * unit - ylo) / (yhi - ylo) * (y0 - y1); };
  c.text((x0 + x1) / 2, y + 18, title, 15, kBlack, 0.5, true);
  for (double v : yt.values) {
    const double at = y0 - (v - ylo) / (yhi - ylo) * (y0 - y1);
    c.line(x0, at, x1, at, kGrey);
    c.text(x0 - 6, at + 4, yt.label(v) + (percent ? "%" : ""), 11, kBlack, 1);
  }
  // Epochs are whole: the round ticks that are whole numbers within the data.
  for (double v : nice_ticks(xmin, xmax, 10).values)
    if (v >= xmin - 1e-9 && v <= xs.back() + 1e-9 && std::abs(v - std::round(v)) < 1e-9)
      c.text(px(v), y0 + 16, fmt("%.0f", v), 11, kBlack, 0.5);
  c.text((x0 + x1) / 2, y0 + 34, "epoch", 12, kBlack, 0.5);
  c.line(x0, y0, x1, y0, kBlack);
  c.line(x0, y0, x0, y1, kBlack);
  double legend_width = 0;
  for (const auto& s : series) legend_width += 26 + c.text_width(s.name, 12) + 18;
  double lx = (x0 + x1 - legend_width + 18) / 2;
  const double ly = y + 40;
  for (const auto& s : series) {
    c.line(lx, ly - 4, lx + 20, ly - 4, s.color, 2);
    c.text(lx + 26, ly, s.name, 12, kBlack);
    lx += 26 + c.text_width(s.name, 12) + 18;
  }
  for (const auto& s : series) {
    c.color(s.color);
    cairo_set_line_width(c.cr(), 2);
    for (std::size_t i = 0; i < s.y.size(); ++i) {
      if (i == 0) cairo_move_to(c.cr(), px(xs[i]), py(s.y[i]));
      else cairo_line_to(c.cr(), px(xs[i]), py(s.y[i]));
    }
    cairo_stroke(c.cr());
    for (std::size_t i = 0; i < s.y.size(); ++i) {
      cairo_arc(c.cr(), px(xs[i]), py(s.y[i]), 3, 0, 2 * M_PI);
      cairo_fill(c.cr());
    }
  }
}

// `s` cut to `max_width` pixels with an ellipsis (whole UTF-8 characters).
std::string fitted(Canvas& c, const std::string& s, double size, double max_width) {
  if (c.text_width(s, size) <= max_width) return s;
  std::string cut = s;
  while (!cut.empty() && c.text_width(cut + "\u2026", size) > max_width) {
    cut.pop_back();
    while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80) cut.pop_back();
    if (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0xC0) cut.pop_back();  // a lead byte left alone
  }
  return cut + "\u2026";
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

}  // namespace

void write_curves_png(const std::string& path, const train::History& h) {
  require(!h.epochs.empty(), "curves: no epochs to plot");
  std::vector<double> xs, tl, vl, ta, va;
  for (const auto& e : h.epochs) {
    xs.push_back(static_cast<double>(e.epoch));
    tl.push_back(e.train_loss);
    vl.push_back(e.test_loss);
    ta.push_back(e.train_accuracy);
    va.push_back(e.test_accuracy);
  }
  Canvas c(1100, 420);
  line_panel(c, 0, 0, 550, 420, "Loss", {{"train", tl, kBlue}, {"validation", vl, kOrange}}, xs, false);
  line_panel(c, 550, 0, 550, 420, "Accuracy", {{"train", ta, kBlue}, {"validation", va, kOrange}}, xs, true);
  c.save(path);
}

void write_comparison_png(const std::string& path, const std::vector<NamedHistory>& runs) {
  require(!runs.empty(), "comparison: no runs to plot");
  const Rgb colors[] = {kOrange, kBlue, kBlack};
  std::vector<double> xs;
  std::vector<Series> loss, accuracy;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& h = runs[k].history;
    require(!h.epochs.empty(), "comparison: run '" + runs[k].name + "' has no epochs");
    Series l{runs[k].name, {}, colors[k % 3]}, a{runs[k].name, {}, colors[k % 3]};
    if (h.epochs.size() > xs.size()) {  // the longest run sets the epoch axis
      xs.clear();
      for (const auto& e : h.epochs) xs.push_back(static_cast<double>(e.epoch));
    }
    for (const auto& e : h.epochs) {
      l.y.push_back(e.test_loss);
      a.y.push_back(e.test_accuracy);
    }
    loss.push_back(std::move(l));
    accuracy.push_back(std::move(a));
  }
  Canvas c(1100, 420);
  line_panel(c, 0, 0, 550, 420, "Validation loss", loss, xs, false);
  line_panel(c, 550, 0, 550, 420, "Validation accuracy", accuracy, xs, true);
  c.save(path);
}

void write_predictions_png(const std::string& path, const PredictionGrid& g) {
  const int cell_w = 190, cell_h = 190, box = 140;
  const int n = static_cast<int>(std::min<int64_t>(g.count, g.rows * g.cols));
  Canvas c(g.cols * cell_w, g.rows * cell_h + 40);
  c.text(g.cols * cell_w / 2.0, 28, "Predicted labels (blue: right, red: wrong)", 18, kBlack, 0.5, true);
  auto name = [&](int32_t k) {
    return k >= 0 && k < static_cast<int32_t>(g.class_names.size()) ? g.class_names[k] : std::to_string(k);
  };
  const int w = static_cast<int>(g.width), h = static_cast<int>(g.height), C = static_cast<int>(g.channels);
  require(C == 1 || C == 3, "predictions grid: images must have 1 or 3 channels");
  // Small images (28x28) are blown up with visible pixels, photos fitted into the box smoothly.
  const double scale = std::min(5.0, static_cast<double>(box) / std::max(w, h));
  float mean[3], sd[3];
  for (int k = 0; k < C; ++k) {
    mean[k] = g.channel_mean.empty() ? g.mean : g.channel_mean[static_cast<std::size_t>(k)];
    sd[k] = g.channel_std.empty() ? g.std : g.channel_std[static_cast<std::size_t>(k)];
  }
  for (int i = 0; i < n; ++i) {
    const double ox = (i % g.cols) * cell_w, oy = 40 + (i / g.cols) * cell_h;
    const bool right = g.labels[i] == g.predicted[i];
    c.text(ox + cell_w / 2.0, oy + 16, "Actual " + name(g.labels[i]), 12, right ? kBlue : kRed, 0.5);
    c.text(ox + cell_w / 2.0, oy + 31, "Predicted " + name(g.predicted[i]), 12, right ? kBlue : kRed, 0.5);
    cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    unsigned char* px = cairo_image_surface_get_data(img);
    const int stride = cairo_image_surface_get_stride(img);
    const int64_t plane = static_cast<int64_t>(w) * h;
    const float* src = g.images + static_cast<int64_t>(i) * C * plane;
    auto byte = [&](int k, int64_t at) {
      const float v = std::clamp(src[k * plane + at] * sd[k] + mean[k], 0.0f, 1.0f);
      return static_cast<uint32_t>(std::lround(v * 255));
    };
    for (int yy = 0; yy < h; ++yy)
      for (int xx = 0; xx < w; ++xx) {
        const int64_t at = static_cast<int64_t>(yy) * w + xx;
        const uint32_t r = byte(0, at), gr = C == 3 ? byte(1, at) : r, b = C == 3 ? byte(2, at) : r;
        reinterpret_cast<uint32_t*>(px + yy * stride)[xx] = (r << 16) | (gr << 8) | b;
      }
    cairo_surface_mark_dirty(img);
    cairo_save(c.cr());
    cairo_translate(c.cr(), ox + (cell_w - w * scale) / 2.0, oy + 40);
    cairo_scale(c.cr(), scale, scale);
    cairo_set_source_surface(c.cr(), img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(c.cr()), scale >= 2 ? CAIRO_FILTER_NEAREST : CAIRO_FILTER_GOOD);
    cairo_paint(c.cr());
    cairo_restore(c.cr());
    cairo_surface_destroy(img);
  }
  c.save(path);
}

void write_confusion_png(const std::string& path, const std::vector<int64_t>& m,
                         const std::vector<std::string>& names) {
  const int k = static_cast<int>(names.size());
  require(static_cast<int>(m.size()) == k * k, "confusion: matrix size does not match the class count");
  const int cell = 56, top = 70;
  const std::string title = "Confusion matrix (rows: actual, columns: predicted)";
  // Names longer than this are ellipsized; the margins grow to the longest.
  constexpr double kMaxName = 200;
  Canvas probe(1, 1);
  std::vector<std::string> shown;
  double name_w = 0;
  for (const auto& n : names) {
    shown.push_back(fitted(probe, n, 12, kMaxName));
    name_w = std::max(name_w, probe.text_width(shown.back(), 12));
  }
  const double left = std::max(60.0, name_w + 20);
  const double slant = name_w * M_SQRT1_2;  // the column names' extent, drawn at 45 degrees
  const double title_w = probe.text_width(title, 16, true) + 40;
  const int width = static_cast<int>(std::ceil(std::max(left + k * cell + std::max(30.0, slant + 16), title_w)));
  Canvas c(width, static_cast<int>(std::ceil(top + k * cell + slant + 40)));
  c.text(width / 2.0, 24, title, 16, kBlack, 0.5, true);
  for (int r = 0; r < k; ++r) {
    int64_t row_total = 0;
    for (int col = 0; col < k; ++col) row_total += m[r * k + col];
    for (int col = 0; col < k; ++col) {
      const int64_t v = m[r * k + col];
      const double share = row_total ? static_cast<double>(v) / row_total : 0.0;
      const double x = left + col * cell, y = top + r * cell;
      // Diagonal in blue, mistakes in red, intensity by the row's share.
      const Rgb base = r == col ? kBlue : kRed;
      const double t = r == col ? share : std::min(1.0, 4 * share);
      cairo_set_source_rgb(c.cr(), 1 - t * (1 - base.r), 1 - t * (1 - base.g), 1 - t * (1 - base.b));
      cairo_rectangle(c.cr(), x, y, cell, cell);
      cairo_fill(c.cr());
      c.text(x + cell / 2.0, y + cell / 2.0 + 5, std::to_string(v), 12, t > 0.55 ? Rgb{1, 1, 1} : kBlack, 0.5);
    }
    c.text(left - 8, top + r * cell + cell / 2.0 + 5, shown[r], 12, kBlack, 1);
  }
  for (int col = 0; col < k; ++col) {
    cairo_save(c.cr());
    cairo_translate(c.cr(), left + col * cell + cell / 2.0 + 4, top + k * cell + 10);
    cairo_rotate(c.cr(), M_PI / 4);
    c.text(0, 0, shown[col], 12, kBlack);
    cairo_restore(c.cr());
  }
  c.save(path);
}

namespace {

// The metric a Kaggle task is judged by (mean column-wise ROC AUC) and each
// class's precision, recall and F1, beside the accuracy headline.
std::string class_scores_html(const ReportInfo& info) {
  if (info.class_scores.empty()) return "";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<p>Mean ROC AUC (one class against the rest, averaged over the classes): <b>%.4f</b></p>\n"
                "<table><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th><th>ROC AUC</th>"
                "<th>support</th></tr>\n",
                info.mean_roc_auc);
  std::string html = buf;
  for (const train::ClassScores& s : info.class_scores) {
    char auc[16] = "n/a";
    if (std::isfinite(s.roc_auc)) std::snprintf(auc, sizeof auc, "%.4f", s.roc_auc);
    std::snprintf(buf, sizeof buf,
                  "<tr><td style=\"text-align:left\">%s</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%s</td>"
                  "<td>%lld</td></tr>\n",
                  html_escape(s.name).c_str(), s.precision, s.recall, s.f1, auc, static_cast<long long>(s.support));
    html += buf;
  }
  return html + "</table>\n";
}

}  // namespace

void write_report_html(const std::string& path, const ReportInfo& info, const train::History& h) {
  std::string html = "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + html_escape(info.title) +
                     "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1150px}"
                     "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
                     "img{max-width:100%;margin:1em 0;border:1px solid #eee}pre{background:#f6f6f6;padding:1em}"
                     "</style></head><body>\n<h1>" +
                     html_escape(info.title) + "</h1>\n";
  // The figures of the weights the run keeps (early stopping may have restored an earlier epoch's).
  const auto& kept = h.kept();
  char buf[640], which[160] = "Final";
  if (h.stopped_epoch)
    std::snprintf(which, sizeof which, "Early stopping ended the run after epoch %lld; the model keeps epoch %lld's weights. Their",
                  static_cast<long long>(h.stopped_epoch), static_cast<long long>(kept.epoch));
  std::snprintf(buf, sizeof buf,
                "<p>Device: %s, %d thread%s. %zu epoch%s in %.1f s (%.0f images/s in training). "
                "%s test accuracy <b>%.2f%%</b>, test loss %.4f.</p>\n",
                html_escape(info.device).c_str(), info.threads, info.threads == 1 ? "" : "s", h.epochs.size(),
                h.epochs.size() == 1 ? "" : "s", h.total_train_seconds, h.images_per_second(), which,
                100 * kept.test_accuracy, kept.test_loss);
  html += buf;
  html += class_scores_html(info);
  for (const auto& img : info.images) html += "<img src=\"" + html_escape(img) + "\" alt=\"" + html_escape(img) + "\">\n";
  if (!info.compared.empty()) {
    html += "<h2>Compared runs</h2>\n<table><tr><th>run</th><th>epochs</th><th>best val_accuracy</th>"
            "<th>at epoch</th><th>final val_accuracy</th><th>final val_loss</th></tr>\n";
    for (const auto& run : info.compared) {
      const auto& e = run.history.epochs;
      if (e.empty()) continue;
      const auto best = std::max_element(e.begin(), e.end(), [](const auto& a, const auto& b) {
        return a.test_accuracy < b.test_accuracy;
      });
      std::snprintf(buf, sizeof buf,
                    "<tr><td style=\"text-align:left\">%s</td><td>%zu</td><td>%.2f%%</td><td>%lld</td><td>%.2f%%</td>"
                    "<td>%.4f</td></tr>\n",
                    html_escape(run.name).c_str(), e.size(), 100 * best->test_accuracy,
                    static_cast<long long>(best->epoch), 100 * e.back().test_accuracy, e.back().test_loss);
      html += buf;
    }
    html += "</table>\n";
  }
  html += "<h2>History</h2>\n<table><tr><th>epoch</th><th>loss</th><th>accuracy</th><th>val_loss</th>"
          "<th>val_accuracy</th><th>seconds</th><th>images/s</th></tr>\n";
  for (const auto& e : h.epochs) {
    std::snprintf(buf, sizeof buf,
                  "<tr><td>%lld</td><td>%.4f</td><td>%.2f%%</td><td>%.4f</td><td>%.2f%%</td><td>%.2f</td><td>%.0f</td></tr>\n",
                  static_cast<long long>(e.epoch), e.train_loss, 100 * e.train_accuracy, e.test_loss,
                  100 * e.test_accuracy, e.train_seconds, e.images_per_second);
    html += buf;
  }
  html += "</table>\n<h2>Config</h2>\n<pre>" + html_escape(info.config_json) + "</pre>\n</body></html>\n";
  io::write_file_atomic(path, html);
}

}  // namespace convoy::report

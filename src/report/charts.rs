//! The report's charts: drawn by plotters into an RGB buffer and encoded as PNG.
//!
//! Text uses a subset of DejaVu Sans bundled with the crate (`assets/fonts/`), so a chart
//! looks the same on every machine and needs no system font.

use std::error::Error as StdError;
use std::sync::Once;

use chrono::DateTime;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use polars::prelude::*;

use super::{TokenSection, human, price, signed};
use crate::{Error, Result};

/// The font family every chart's text uses.
const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-subset.ttf");
static REGISTER: Once = Once::new();

const GAIN: RGBColor = RGBColor(38, 166, 91);
const LOSS: RGBColor = RGBColor(214, 69, 65);
const INK: RGBColor = RGBColor(40, 40, 48);
const NEUTRAL: RGBColor = RGBColor(120, 120, 135);

type Drawn = std::result::Result<(), Box<dyn StdError>>;

fn chart_error(chart: &str) -> impl FnOnce(Box<dyn StdError>) -> Error + '_ {
    move |e| Error::Chart {
        chart: chart.to_owned(),
        reason: e.to_string(),
    }
}

/// Draws into a white `width` × `height` RGB canvas and encodes it as PNG.
fn render(
    chart: &str,
    (width, height): (u32, u32),
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> Drawn,
) -> Result<Vec<u8>> {
    REGISTER.call_once(|| {
        // The bytes are the crate's own font: a failure is a build defect, caught by the tests
        // (every chart's text would then fail to draw, with that error).
        let _ = register_font(FONT, FontStyle::Normal, FONT_BYTES);
    });
    let mut rgb = vec![255u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| Box::new(e) as Box<dyn StdError>)
            .and_then(|_| draw(root.clone()))
            .and_then(|_| root.present().map_err(|e| Box::new(e) as Box<dyn StdError>))
            .map_err(chart_error(chart))?;
    }
    encode(chart, &rgb, width, height)
}

fn encode(chart: &str, rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Best);
    encoder
        .write_header()
        .and_then(|mut w| {
            w.write_image_data(rgb)?;
            w.finish()
        })
        .map_err(|e| Error::Chart {
            chart: chart.to_owned(),
            reason: format!("encoding PNG: {e}"),
        })?;
    Ok(out)
}

fn f64s(df: &DataFrame, name: &str) -> std::result::Result<Vec<f64>, Box<dyn StdError>> {
    Ok(df
        .column(name)?
        .cast(&DataType::Float64)?
        .f64()?
        .iter()
        .map(|v| v.unwrap_or(f64::NAN))
        .collect())
}

/// `(min, max)` of the finite values, widened by 5 % (and around a constant series).
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        lo.abs().max(1e-12) * 0.01
    };
    (lo - pad, hi + pad)
}

fn clock(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_default()
}

/// Candlesticks of one token's bars, with its buy (green) and sell (red) USD volume stacked
/// below.
pub(super) fn candles(t: &TokenSection, bar_seconds: i64, chart: &str) -> Result<Vec<u8>> {
    let size = (960, 480);
    render(chart, size, |root| {
        let bars = &t.bars;
        let time: Vec<i64> = bars
            .column("timestamp")?
            .cast(&DataType::Int64)?
            .i64()?
            .iter()
            .map(|v| v.unwrap_or(0) / 1_000_000)
            .collect();
        let (open, high, low, close) = (
            f64s(bars, "open")?,
            f64s(bars, "high")?,
            f64s(bars, "low")?,
            f64s(bars, "close")?,
        );
        // Bars of a stored series carry no buy or sell volume: their whole volume is drawn
        // as "buys", in a neutral colour.
        let (mut buy, sell) = (f64s(bars, "buy_volume")?, f64s(bars, "sell_volume")?);
        let split = buy.iter().chain(&sell).any(|v| v.is_finite());
        if !split && bars.height() > 0 {
            buy = f64s(bars, "volume")?;
        }
        let buy_colour = if split { GAIN } else { NEUTRAL };
        let (Some(&first), Some(&last)) = (time.first(), time.last()) else {
            return Ok(());
        };
        let x_range = (first - bar_seconds / 2)..(last + bar_seconds + bar_seconds / 2);
        let (y_lo, y_hi) = span(low.iter().chain(high.iter()).copied());
        let v_hi = buy
            .iter()
            .zip(&sell)
            .map(|(b, s)| b + if s.is_finite() { *s } else { 0.0 })
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.05;

        let (upper, lower) = root.split_vertically(340);
        let title = format!(
            "{}  ·  {}-minute bars  ·  last close {}",
            t.label(),
            bar_seconds / 60,
            t.last_close().map(price).unwrap_or_else(|| "-".into())
        );
        let mut chart = ChartBuilder::on(&upper)
            .caption(title, (FONT, 20).into_font().color(&INK))
            .margin(10)
            .x_label_area_size(0)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range.clone(), y_lo..y_hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 240))
            .y_labels(6)
            .y_label_formatter(&|v| price(*v))
            .label_style((FONT, 12))
            .draw()?;
        let width_px = (860.0 / time.len().max(1) as f64 * 0.7).clamp(1.0, 18.0) as u32;
        chart.draw_series((0..time.len()).filter(|&i| close[i].is_finite()).map(|i| {
            CandleStick::new(
                time[i] + bar_seconds / 2,
                open[i],
                high[i],
                low[i],
                close[i],
                GAIN.filled(),
                LOSS.filled(),
                width_px,
            )
        }))?;

        let mut volume = ChartBuilder::on(&lower)
            .margin_left(10)
            .margin_right(10)
            .margin_bottom(10)
            .x_label_area_size(28)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range, 0.0..v_hi)?;
        volume
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 240))
            .x_labels(8)
            .x_label_formatter(&|s| clock(*s))
            .y_labels(3)
            .y_label_formatter(&|v| format!("${}", human(*v)))
            .x_desc("UTC")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 12))
            .draw()?;
        let (pad, body) = (bar_seconds * 15 / 100, bar_seconds * 70 / 100);
        let zero = |v: f64| if v.is_finite() { v } else { 0.0 };
        volume.draw_series((0..time.len()).map(|i| {
            let x0 = time[i] + pad;
            Rectangle::new(
                [(x0, 0.0), (x0 + body, zero(buy[i]))],
                buy_colour.mix(0.8).filled(),
            )
        }))?;
        volume.draw_series((0..time.len()).map(|i| {
            let x0 = time[i] + pad;
            let b = zero(buy[i]);
            Rectangle::new(
                [(x0, b), (x0 + body, b + zero(sell[i]))],
                LOSS.mix(0.8).filled(),
            )
        }))?;
        Ok(())
    })
}

/// Total PnL of the leaderboard's wallets, best first.
pub(super) fn leaderboard(board: &DataFrame, chart: &str) -> Result<Vec<u8>> {
    render(chart, (960, 360), |root| {
        let total = f64s(board, "total_pnl")?;
        let n = total.len();
        let (lo, hi) = span(total.iter().copied().chain([0.0]));
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Total PnL of the top {n} wallets (realized + unrealized, USD)"),
                (FONT, 20).into_font().color(&INK),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.6..(n as f64 - 0.4), lo..hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 240))
            .x_labels(n.clamp(1, 20))
            .x_label_formatter(&|x| {
                let r = x.round();
                if (x - r).abs() < 0.05 && r >= 0.0 {
                    format!("#{}", r as i64 + 1)
                } else {
                    String::new()
                }
            })
            .y_labels(6)
            .y_label_formatter(&|v| signed(*v))
            .label_style((FONT, 12))
            .draw()?;
        chart.draw_series(total.iter().enumerate().map(|(i, &v)| {
            let x = i as f64;
            let color = if v >= 0.0 { GAIN } else { LOSS };
            Rectangle::new([(x - 0.35, 0.0), (x + 0.35, v)], color.filled())
        }))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(closes: &[f64]) -> TokenSection {
        let n = closes.len();
        let ts: Vec<i64> = (0..n as i64)
            .map(|i| 1_700_000_000_000_000 + i * 900_000_000)
            .collect();
        let bars = df!(
            "timestamp" => ts,
            // Odd bars close below their open.
            "open" => closes.iter().enumerate().map(|(i, c)| if i % 2 == 1 { c * 1.01 } else { c * 0.99 }).collect::<Vec<_>>(),
            "high" => closes.iter().map(|c| c * 1.02).collect::<Vec<_>>(),
            "low" => closes.iter().map(|c| c * 0.97).collect::<Vec<_>>(),
            "close" => closes.to_vec(),
            "buy_volume" => vec![100.0; n],
            "sell_volume" => vec![50.0; n],
        )
        .unwrap();
        TokenSection {
            token_address: "T".into(),
            symbol: Some("TOK".into()),
            usd_volume: 150.0 * n as f64,
            events: n,
            bars,
        }
    }

    fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(png_bytes);
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    #[test]
    fn a_candle_chart_is_a_png_with_green_and_red_candles() {
        let png_bytes = candles(&section(&[1.0, 1.1, 1.05, 1.2]), 900, "t.png").unwrap();
        let (w, h, rgb) = decode(&png_bytes);
        assert_eq!((w, h), (960, 480));
        let has = |c: RGBColor| rgb.chunks(3).any(|p| p == [c.0, c.1, c.2]);
        assert!(has(GAIN) && has(LOSS), "both candle colours are drawn");
        assert!(has(INK), "the title is drawn with the bundled font");
    }

    #[test]
    fn a_leaderboard_chart_draws_gains_and_losses() {
        let board = df!("total_pnl" => [120.0, 30.0, -45.0]).unwrap();
        let (w, h, rgb) = decode(&leaderboard(&board, "l.png").unwrap());
        assert_eq!((w, h), (960, 360));
        assert!(rgb.chunks(3).any(|p| p == [GAIN.0, GAIN.1, GAIN.2]));
        assert!(rgb.chunks(3).any(|p| p == [LOSS.0, LOSS.1, LOSS.2]));
    }

    #[test]
    fn bars_without_buys_and_sells_draw_their_volume_in_grey() {
        let mut t = section(&[1.0, 1.1, 1.05]);
        let n = t.bars.height();
        let none = Column::full_null("buy_volume".into(), n, &DataType::Float64);
        t.bars.replace("buy_volume", none.clone()).unwrap();
        t.bars
            .replace("sell_volume", none.with_name("sell_volume".into()))
            .unwrap();
        t.bars
            .with_column(Column::new("volume".into(), vec![150.0; n]))
            .unwrap();
        let (_, _, rgb) = decode(&candles(&t, 900, "s.png").unwrap());
        let has = |c: RGBColor| rgb.chunks(3).any(|p| p == [c.0, c.1, c.2]);
        let grey = NEUTRAL.mix(0.8).to_rgba();
        let blended = |p: &[u8]| {
            // Drawn at 80 % over the white background.
            let mix = |c: u8| (f64::from(c) * grey.3 + 255.0 * (1.0 - grey.3)).round() as i32;
            (i32::from(p[0]) - mix(grey.0)).abs() <= 1
                && (i32::from(p[1]) - mix(grey.1)).abs() <= 1
                && (i32::from(p[2]) - mix(grey.2)).abs() <= 1
        };
        assert!(rgb.chunks(3).any(blended), "the volume is drawn in grey");
        assert!(has(GAIN), "the candles keep their colours");
    }

    #[test]
    fn an_empty_section_draws_an_empty_chart_not_an_error() {
        let png_bytes = candles(&section(&[]), 900, "e.png").unwrap();
        assert_eq!(decode(&png_bytes).0, 960);
    }
}

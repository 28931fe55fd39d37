//! Logs (tracing to stderr, text or JSON) and, with `--otlp-endpoint`, the same spans exported
//! as OpenTelemetry traces over OTLP/HTTP (JSON) — cargo feature `otel`, on by default.

use crate::cli::LogFormat;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes what is still buffered.
#[derive(Default)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

/// Installs the global subscriber: `DOCKET_LOG` (else `default`) filters; `otlp` is an
/// OTLP/HTTP collector base URL (`http://127.0.0.1:4318`), spans go to `{otlp}/v1/traces`.
///
/// # Errors
/// The exporter cannot be built (bad URL), or OTLP export was asked of a build without the
/// `otel` feature.
pub fn init(format: LogFormat, default: &str, otlp: Option<&str>) -> anyhow::Result<Telemetry> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOCKET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt: Box<dyn Layer<_> + Send + Sync> = match format {
        LogFormat::Json => Box::new(fmt.json()),
        LogFormat::Text => Box::new(fmt),
    };
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter));
    let Some(endpoint) = otlp else {
        registry.init();
        return Ok(Telemetry::default());
    };
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TracerProvider as _;
        use opentelemetry_otlp::{WithExportConfig, WithHttpConfig as _};
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpJson)
            .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
            .with_headers(Default::default())
            .build()?;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("docket")
                    .build(),
            )
            .build();
        let tracer = provider.tracer("docket");
        // Spans at info and above (task attempts, pg_task runs), whatever DOCKET_LOG says.
        let otel = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
        registry.with(otel).init();
        docket_core::trace::set_span_linker(link_to_trace);
        Ok(Telemetry {
            provider: Some(provider),
        })
    }
    #[cfg(not(feature = "otel"))]
    {
        registry.init();
        anyhow::bail!("--otlp-endpoint {endpoint}: this docket was built without the otel feature")
    }
}

/// Makes a task span a child of its trace: the remote parent carries the task's trace id (the
/// enqueuing request's, when it sent `traceparent`), so the attempt shows in that trace.
#[cfg(feature = "otel")]
fn link_to_trace(span: &tracing::Span, trace_id: &str) {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Ok(tid) = TraceId::from_hex(trace_id) else {
        return;
    };
    // The enqueuer's own span id is not kept; a stable one made from the trace id stands in.
    let low = u64::from_str_radix(&trace_id[16..], 16).unwrap_or(1).max(1);
    let parent = SpanContext::new(
        tid,
        SpanId::from_bytes(low.to_be_bytes()),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
}

impl Telemetry {
    /// Flushes and stops the exporter (spans still buffered are sent).
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(p) = self.provider {
            if let Err(e) = p.shutdown() {
                eprintln!("OTLP export did not flush: {e}");
            }
        }
    }
}

package org.kerasbertimpl.edgedemo

import android.os.Bundle
import android.text.Editable
import android.text.TextWatcher
import android.widget.EditText
import android.widget.RadioGroup
import android.widget.TextView
import androidx.appcompat.app.AppCompatActivity
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors
import org.kerasbertimpl.edgedemo.logic.Classification
import org.kerasbertimpl.edgedemo.logic.ExportContract
import org.kerasbertimpl.edgedemo.logic.InputCheck
import org.kerasbertimpl.edgedemo.logic.LatestOnlyRunner
import org.kerasbertimpl.edgedemo.logic.ResultFormatter

/**
 * Android glue only: views, threads, and the two runtimes (ModelRuntimes.kt). Every decision
 * (input limits, tokenization, softmax, labels, strings) is in logic/, which is unit-tested on
 * the JVM against the Python pipeline (tests/export/test_android_logic.py).
 */
class MainActivity : AppCompatActivity() {
    private data class Request(val text: String, val useLitert: Boolean)
    private data class Outcome(val classification: Classification?, val message: String)

    private val worker: ExecutorService = Executors.newSingleThreadExecutor()
    private var runtimes: ModelRuntimes? = null
    private lateinit var runner: LatestOnlyRunner<Request, Outcome>
    private lateinit var text: EditText
    private lateinit var runtime: RadioGroup
    private lateinit var label: TextView
    private lateinit var bars: TextView
    private lateinit var latency: TextView
    private lateinit var message: TextView

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_main)
        text = findViewById(R.id.text)
        runtime = findViewById(R.id.runtime)
        label = findViewById(R.id.label)
        bars = findViewById(R.id.bars)
        latency = findViewById(R.id.latency)
        message = findViewById(R.id.message)

        runner = LatestOnlyRunner(worker, { request -> classify(request) }, object : LatestOnlyRunner.Listener<Request, Outcome> {
            override fun onResult(input: Request, output: Outcome, nanos: Long, superseded: Boolean) {
                // A newer text is already queued: show nothing stale, its own result follows.
                if (!superseded) runOnUiThread { show(output, nanos) }
            }

            override fun onError(input: Request, error: Exception, superseded: Boolean) {
                if (!superseded) runOnUiThread { showMessage("Prediction failed: ${error.message}") }
            }
        })

        // Loading maps ~90 MB of model: off the UI thread, on the same worker that predicts.
        worker.execute {
            try {
                runtimes = ModelRuntimes.load(this)
                runOnUiThread { showMessage(""); label.text = ""; submit() }
            } catch (e: Exception) {
                runOnUiThread {
                    label.text = "No model"
                    showMessage(e.message ?: e.toString())
                }
            }
        }
        text.addTextChangedListener(object : TextWatcher {
            override fun beforeTextChanged(s: CharSequence?, start: Int, count: Int, after: Int) {}
            override fun onTextChanged(s: CharSequence?, start: Int, before: Int, count: Int) {}
            override fun afterTextChanged(s: Editable?) = submit()
        })
        runtime.setOnCheckedChangeListener { _, _ -> submit() }
    }

    private fun submit() {
        if (runtimes == null) return
        runner.submit(Request(text.text.toString(), runtime.checkedRadioButtonId == R.id.runtime_litert))
    }

    /** Runs on the worker thread. */
    private fun classify(request: Request): Outcome {
        val models = runtimes ?: return Outcome(null, "The model is not loaded.")
        val verdict = InputCheck.check(request.text, models.tokenizer, models.manifest.sequenceLength)
        if (!verdict.ok) return Outcome(null, verdict.message)
        val classification = if (request.useLitert) {
            models.classifyIds(verdict.encoded)
        } else {
            models.classifyText(request.text)
        }
        return Outcome(classification, verdict.message)
    }

    private fun show(outcome: Outcome, nanos: Long) {
        val c = outcome.classification
        if (c == null) {
            label.text = ""
            bars.text = ""
            latency.text = ""
        } else {
            label.text = ResultFormatter.headline(c)
            bars.text = ResultFormatter.bars(c, 20).joinToString("\n")
            latency.text = ResultFormatter.latency(nanos)
        }
        message.text = outcome.message
    }

    private fun showMessage(text: String) {
        message.text = text
    }

    override fun onDestroy() {
        worker.execute { runtimes?.close() }
        worker.shutdown()
        super.onDestroy()
    }

    companion object {
        /** Under this top probability the screen says "unsure". */
        const val THRESHOLD = 0.6f
    }
}

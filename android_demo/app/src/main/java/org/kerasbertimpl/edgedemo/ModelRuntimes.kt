package org.kerasbertimpl.edgedemo

import android.content.Context
import com.google.mediapipe.tasks.core.BaseOptions
import com.google.mediapipe.tasks.text.textclassifier.TextClassifier
import java.io.FileInputStream
import java.nio.MappedByteBuffer
import java.nio.channels.FileChannel
import org.kerasbertimpl.edgedemo.logic.BertCharTable
import org.kerasbertimpl.edgedemo.logic.Classification
import org.kerasbertimpl.edgedemo.logic.EncodedText
import org.kerasbertimpl.edgedemo.logic.ExportContract
import org.kerasbertimpl.edgedemo.logic.ExportManifest
import org.kerasbertimpl.edgedemo.logic.WordPieceTokenizer
import org.tensorflow.lite.Interpreter

/**
 * The bundled export (assets/model/, copied by the Gradle task copyKbertExport) in both
 * runtimes: MediaPipe's TextClassifier on the MediaPipe .tflite (its own tokenizer, from the
 * metadata), and LiteRT on the token-id .tflite fed by WordPieceTokenizer. Both use the
 * dynamic-range int8 files (a quarter of float32's size, within half a point of its MR
 * accuracy; docs/export.md). Not compiled on the project's machines (no Android SDK).
 */
class ModelRuntimes private constructor(
    val manifest: ExportManifest,
    val tokenizer: WordPieceTokenizer,
    private val mediapipe: TextClassifier,
    private val litert: Interpreter,
) : AutoCloseable {

    /** MediaPipe: raw text in; categories come back by index, mapped to labels.txt order. */
    fun classifyText(text: String): Classification {
        val categories = mediapipe.classify(text).classificationResult().classifications()[0].categories()
        val scores = FloatArray(manifest.labelNames.size)
        for (category in categories) {
            scores[category.index()] = category.score()
        }
        return Classification.fromProbabilities(scores, manifest.labelNames, MainActivity.THRESHOLD)
    }

    /** LiteRT: our ids in ([1, sequence_length] int32 each), probabilities out. */
    fun classifyIds(encoded: EncodedText): Classification {
        val inputs = mapOf<String, Any>(
            "ids" to arrayOf(encoded.ids),
            "mask" to arrayOf(encoded.mask),
            "segment_ids" to arrayOf(encoded.segmentIds),
        )
        val probabilities = arrayOf(FloatArray(manifest.labelNames.size))
        val logits = arrayOf(FloatArray(manifest.labelNames.size))
        // The id model takes any [batch, length]; run() resizes its inputs to these arrays.
        litert.runSignature(inputs, mapOf(ExportContract.PROBABILITIES to probabilities, "logits" to logits), ExportContract.SIGNATURE)
        return Classification.fromProbabilities(probabilities[0], manifest.labelNames, MainActivity.THRESHOLD)
    }

    override fun close() {
        mediapipe.close()
        litert.close()
    }

    companion object {
        private fun asset(name: String) = "${ExportContract.ASSET_DIR}/$name"

        fun load(context: Context): ModelRuntimes {
            val manifestText = try {
                context.assets.open(asset(ExportContract.MANIFEST)).bufferedReader().readText()
            } catch (e: java.io.IOException) {
                throw IllegalStateException("No model bundled: build with a `kbert export` folder " +
                    "(make demo, or ./gradlew assembleDebug -PkbertExport=DIR).", e)
            }
            val manifest = ExportManifest.parse(manifestText)
            val vocabulary = context.assets.open(asset(ExportContract.VOCABULARY)).use { WordPieceTokenizer.readVocabulary(it) }
            val table = context.assets.open(ExportContract.CHAR_TABLE).use { BertCharTable.read(it) }
            val tokenizer = WordPieceTokenizer(vocabulary, table, manifest.lowercase, WordPieceTokenizer.DEFAULT_MAX_CHARS_PER_WORD)
            val options = TextClassifier.TextClassifierOptions.builder()
                .setBaseOptions(BaseOptions.builder().setModelAssetPath(asset(manifest.file(ExportContract.MEDIAPIPE_INT8))).build())
                .build()
            val mediapipe = TextClassifier.createFromOptions(context, options)
            val litert = Interpreter(map(context, asset(manifest.file(ExportContract.LITERT_INT8))), Interpreter.Options().setNumThreads(2))
            return ModelRuntimes(manifest, tokenizer, mediapipe, litert)
        }

        private fun map(context: Context, path: String): MappedByteBuffer =
            context.assets.openFd(path).use { fd ->
                FileInputStream(fd.fileDescriptor).channel.use { channel ->
                    channel.map(FileChannel.MapMode.READ_ONLY, fd.startOffset, fd.declaredLength)
                }
            }
    }
}

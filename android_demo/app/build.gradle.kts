import groovy.json.JsonSlurper

plugins {
    id("com.android.application")
}

android {
    namespace = "org.kerasbertimpl.edgedemo"
    compileSdk = 36

    defaultConfig {
        applicationId = "org.kerasbertimpl.edgedemo"
        // MediaPipe Tasks' Android setup guide asks for API 28 or newer.
        minSdk = 28
        targetSdk = 36
        versionCode = 1
        versionName = "1.0"
    }
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    androidResources {
        // The .tflite files are memory-mapped by MediaPipe and LiteRT: keep them uncompressed.
        noCompress += "tflite"
    }
}

dependencies {
    implementation("androidx.appcompat:appcompat:1.7.1")
    implementation("com.google.android.material:material:1.13.0")
    // MediaPipe Tasks Text: the same engine version as the Python client the export tests run (0.10.21).
    implementation("com.google.mediapipe:tasks-text:0.10.21")
    // LiteRT (TensorFlow Lite's runtime) for the token-id .tflite and the app's own tokenizer.
    implementation("com.google.ai.edge.litert:litert:1.4.0")
    testImplementation("junit:junit:4.13.2")
}

// Bundles a `kbert export` folder into the app: export.json, vocab.txt, labels.txt and the
// files of these export.json "files" keys (ExportContract.BUNDLED_FILE_KEYS; the contract test
// in tests/export/test_android_logic.py holds this list to it). The folder comes from
// -PkbertExport=DIR, default ../data/demo/mr_export (what `make demo` writes).
val bundledFileKeys = listOf("mediapipe", "mediapipe_int8", "tflite_float32", "tflite_dynamic_int8")
val kbertExport = (findProperty("kbertExport") as String?) ?: "${rootDir}/../data/demo/mr_export"

val copyKbertExport by tasks.registering(Copy::class) {
    val exportDir = file(kbertExport)
    val manifestFile = File(exportDir, "export.json")
    inputs.file(manifestFile)
    into(layout.projectDirectory.dir("src/main/assets/model"))
    from(exportDir) {
        include("export.json", "vocab.txt", "labels.txt")
    }
    doFirst {
        if (!manifestFile.isFile) {
            throw GradleException("No export.json in $exportDir: run `make demo` or pass -PkbertExport=DIR (a `kbert export` folder).")
        }
    }
    @Suppress("UNCHECKED_CAST")
    val files = if (manifestFile.isFile) {
        (JsonSlurper().parse(manifestFile) as Map<String, Any>)["files"] as Map<String, String>
    } else {
        emptyMap()
    }
    for (key in bundledFileKeys) {
        val relative = files[key] ?: continue
        from(File(exportDir, relative)) {
            into(relative.substringBeforeLast('/', ""))
        }
    }
}

tasks.named("preBuild") {
    dependsOn(copyKbertExport)
}

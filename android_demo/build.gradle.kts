// AGP 9 compiles Kotlin itself (built-in Kotlin), so no kotlin-android plugin is applied.
plugins {
    id("com.android.application") version "9.0.0" apply false
}

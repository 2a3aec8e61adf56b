// The edge demo app (issue 20). Not built on the project's machines: no Android SDK and no
// Maven repository there; see docs/edge_demos.md, "Android demo", for what is tested instead.
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}
dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
    }
}
rootProject.name = "kbert-edge-demo"
include(":app")
